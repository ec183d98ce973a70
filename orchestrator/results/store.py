"""The results store: one folder per benchmark run (the truth) and an SQLite index of runs and
seeds (a cache, `orchestrator.results.index`, rebuilt from the folders whenever they are newer).

A run is opened once (`Store.open`, `Store.create`) and written through its `StoredRun` handle,
which keeps the files and the index in step. Every file is validated as it is read: a damaged or
foreign file is a `RecordError` naming the file and the field; a run or seed folder that is a link
leading out of its folder is refused. A run is written only under its lock (`orchestrator.results.lock`):
`create` takes it, `StoredRun.locked` takes it for an existing run, `close` gives it up.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ValidationError

from orchestrator.config.files import first_problem
from orchestrator.config.reading import read_json
from orchestrator.errors import RecordError, StoreError, UsageError
from orchestrator.results import atomic, inference_store
from orchestrator.results.decisions import DecisionLog
from orchestrator.results.folders import new_locked, writing
from orchestrator.results.index import Index, IndexBusy
from orchestrator.results.inference import INFERENCE_FILE
from orchestrator.results.lock import RunLock, is_held
from orchestrator.results.paths import (
    MANIFEST_NAME,
    RECORD_NAME,
    STATE_NAME,
    SUMMARY_NAME,
    RunPaths,
    check_run_id,
    inside,
)
from orchestrator.results.records import Manifest, Record, RunRecord, SeedState, SeedStateName, Summary

R = TypeVar("R", bound=Record)


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def new_run_id(workload: str, profile: str) -> str:
    """``<workload>-<profile>-<UTC stamp>-<4 hex>``, in the characters a run id may hold."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    name = re.sub(r"[^A-Za-z0-9._-]|\.\.+", "_", f"{workload}-{profile}-{stamp}-{secrets.token_hex(2)}")
    return check_run_id(name.lstrip("._-"))


def check_results_dir(results_dir: Path, *, write: bool = True) -> None:
    """The results folder must be a folder this user can read (and, to ``write``, write), or one
    that can be made (nothing is made here). A link that leads nowhere, or in a loop, is refused."""
    if any(ord(c) < 32 or ord(c) == 127 for c in str(results_dir)):
        raise StoreError(f"results folder {str(results_dir)!r} has a control character in its name")
    probe = results_dir
    while not probe.exists() and probe != probe.parent:
        if probe.is_symlink():  # exists() is False for a dangling link and for a loop of links
            raise StoreError(f"results folder {results_dir}: {probe} is a link that leads nowhere (or in a loop)")
        probe = probe.parent
    if not probe.is_dir():
        what = "results folder" if probe == results_dir else f"results folder {results_dir}: its parent"
        raise StoreError(f"{what} {probe} is not a folder")
    if write and not os.access(probe, os.R_OK | os.W_OK | os.X_OK):
        raise StoreError(f"results folder {probe} is not readable and writable by this user")
    if not write and probe == results_dir and not os.access(probe, os.R_OK | os.X_OK):
        raise StoreError(f"results folder {probe} is not readable by this user")


def read_record(path: Path, model: type[R]) -> R | None:
    """A stored JSON file as its typed record; None when it does not exist."""
    try:
        data = read_json(path)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise RecordError(f"{path}: unreadable ({' '.join(str(exc).split())}); repair or remove the run folder") \
            from None
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise RecordError(f"{path}: {first_problem(exc, count_others=True)}; repair or remove the run folder") from None


@dataclass(frozen=True)
class BrokenRun:
    """A run folder that cannot be read, and why."""

    run_id: str
    problem: str


@dataclass(frozen=True)
class Listing:
    rows: list[dict[str, Any]]
    """One row per readable run, newest first."""
    broken: list[BrokenRun]
    """Run folders that could not be read."""
    index: Index | None = None
    """The refreshed index the rows came from (its seed rows answer comparisons without opening runs)."""
    note: str = ""
    """Why the rows came from an index built in memory where a saved one would have served."""


class Store:
    """One results folder."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.index = Index(root)

    def paths(self, run_id: str) -> RunPaths:
        """A run's paths; its folder, when it exists, must not lead out of the results folder."""
        folder = self.root / check_run_id(run_id)
        if folder.is_symlink():
            inside(folder, self.root)
        return RunPaths(folder)

    def run_ids(self) -> list[str]:
        """Folders holding a manifest, whatever its state."""
        if not self.root.is_dir():
            return []
        return sorted(p.parent.name for p in self.root.glob("*/manifest.json"))

    def create(self, manifest: Manifest) -> StoredRun:
        """Make the run's folder, lock it, write its manifest and a pending state per seed. The
        run is returned locked: `StoredRun.close` (or the end of the process) releases it."""
        paths = self.paths(manifest.run_id)
        lock = new_locked(paths.root, paths.lock, paths.run_id, self.root)
        run = StoredRun(self, paths, manifest, None, {}, {}, lock=lock)
        with writing(paths.manifest):
            atomic.write_json(paths.manifest, manifest.to_json())
            for seed in manifest.seeds:
                state = SeedState(seed=seed, state=SeedStateName.PENDING)
                atomic.write_json(paths.seed(seed).state, state.to_json())
                run.states[seed] = state
        run.sync()
        return run

    def manifest(self, run_id: str) -> Manifest:
        """A run's manifest alone, validated (what a comparison needs of a run besides its index rows)."""
        paths = self.paths(run_id)
        manifest = read_record(paths.manifest, Manifest)
        if manifest is None:
            known = self.run_ids()[-5:]
            hint = f" (runs here: {', '.join(known)})" if known else ""
            raise UsageError(f"no run {run_id!r} in {self.root}{hint}")
        if manifest.run_id != paths.run_id:
            raise RecordError(f"{paths.manifest}: field run_id: {manifest.run_id!r} is not its folder's name")
        return manifest

    def open(self, run_id: str) -> StoredRun:
        paths = self.paths(run_id)
        manifest = self.manifest(run_id)
        records: dict[int, RunRecord] = {}
        states: dict[int, SeedState] = {}
        for seed in manifest.seeds:
            seed_paths = paths.seed(seed)
            if seed_paths.root.is_symlink():
                inside(seed_paths.root, paths.root)
            state = read_record(seed_paths.state, SeedState)
            if state is not None:
                if state.seed != seed:
                    raise RecordError(f"{seed_paths.state}: field seed: {state.seed} is not its folder's seed {seed}")
                states[seed] = state
            record = read_record(seed_paths.record, RunRecord)
            if record is not None:
                records[seed] = record
        decisions = read_record(paths.decisions, DecisionLog)
        if decisions is not None and manifest.seeds != decisions.rule.seed_order[:len(manifest.seeds)]:
            raise RecordError(f"{paths.decisions}: field rule.seed_order: the manifest's seeds {list(manifest.seeds)}"
                              " are not where it begins; repair or remove the run folder")
        return StoredRun(self, paths, manifest, read_record(paths.summary, Summary), records, states,
                         decisions=decisions)

    def refresh(self, index: Index | None = None) -> list[BrokenRun]:
        """Bring the index (this folder's, or ``index``) up to date with the folders: re-read only
        runs that changed, drop rows of runs whose folder is gone or damaged, all in one transaction.
        Returns the damaged ones. Training runs and inference runs
        (`orchestrator.results.inference_store`) alike."""
        index = index or self.index
        with index.batch():
            synced = index.synced()
            training, inference = self._stamps(index.seed_numbers())
            broken: list[BrokenRun] = []
            for run_id, stamp in [*training.items(), *inference.items()]:
                is_training = run_id in training
                if synced.get(run_id) == stamp:
                    continue
                try:
                    if is_training:
                        self.open(run_id).sync(index)
                    else:
                        inference_store.sync(self.root, inference_store.open_run(self.root, run_id), index)
                except (RecordError, UsageError) as exc:
                    broken.append(BrokenRun(run_id, str(exc)))
            index.forget((set(synced) - set(training) - set(inference)) | {b.run_id for b in broken})
        return broken

    def _stamps(self, seeds: dict[str, list[int]]) -> tuple[dict[str, float], dict[str, float]]:
        """Each run folder's time (`_run_mtime`), training runs and inference runs apart: one pass
        over the folder, a few system calls per run (thousands of runs are listed in a blink).
        ``seeds``: each indexed run's seeds (a run that gains a seed rewrites its manifest, so the
        seed folders of a run the index knows need no listing)."""
        training: dict[str, float] = {}
        inference: dict[str, float] = {}
        with os.scandir(self.root) as entries:
            names = sorted(e.name for e in entries if not e.name.startswith(".") and e.is_dir())
        for name in names:
            folder = os.path.join(self.root, name)
            try:
                training[name] = _run_mtime(folder, os.stat(os.path.join(folder, MANIFEST_NAME)).st_mtime,
                                            seeds.get(name))
            except FileNotFoundError:
                with contextlib.suppress(FileNotFoundError):
                    inference[name] = os.stat(os.path.join(folder, INFERENCE_FILE)).st_mtime
        return training, inference

    def list(self, *, label: str | None = None, workload: str | None = None) -> Listing:
        """Runs, newest first, from the refreshed index, and the folders that could not be read.
        The index a writable folder keeps is saved by the first read; a read-only folder, or one
        whose index another process holds, is indexed in memory (nothing is written)."""
        if not self.root.is_dir():
            return Listing([], [])
        note = ""
        index = self.index if self._may_write_index() else Index.in_memory(self.root)
        try:
            broken = self.refresh(index)
        except IndexBusy as exc:
            note = f"{exc}: listed from the run folders"
            index = Index.in_memory(self.root)
            broken = self.refresh(index)
        rows = index.runs(label=label, workload=workload)
        for row in rows:  # 'running' on disk, but nobody holds its lock: its process is gone
            if row["state"] == "running" and not is_held(RunPaths(self.root / row["run_id"]).lock):
                row["state"] = "stopped"
        return Listing(rows, broken, index, note)

    def _may_write_index(self) -> bool:
        if not os.access(self.root, os.W_OK):
            return False
        return not self.index.path.exists() or os.access(self.index.path, os.W_OK)


@dataclass
class StoredRun:
    """A benchmark run as it stands on disk, and the one way to write it."""

    store: Store
    paths: RunPaths
    manifest: Manifest
    summary: Summary | None
    records: dict[int, RunRecord] = field(default_factory=dict)
    """seed -> record, for seeds whose record exists."""
    states: dict[int, SeedState] = field(default_factory=dict)
    lock: RunLock | None = None
    """Held while this process may write the run."""
    decisions: DecisionLog | None = None
    """A sequential rule's record (`decisions.json`), for runs that decide their own seed count."""
    index_note: str = ""
    """Set when a write of this run could not update the index (another process held it)."""

    @property
    def run_id(self) -> str:
        return self.paths.run_id

    def locked(self) -> StoredRun:
        """This run, read again under its lock (RunBusy, naming the holder, when a live process
        holds it). Validate before locking: taking the lock writes the lock file."""
        with writing(self.paths.lock):
            lock = RunLock(self.paths.lock, self.run_id)
        try:
            run = self.store.open(self.run_id)
        except BaseException:
            lock.release()
            raise
        run.lock = lock
        return run

    def close(self) -> None:
        """Release the lock (idempotent)."""
        if self.lock is not None:
            self.lock.release()

    def finished(self, seed: int) -> bool:
        """Finished means a finished state and the record it finished with."""
        state = self.states.get(seed)
        return state is not None and state.finished and seed in self.records

    def unfinished_seeds(self) -> list[int]:
        return [s for s in self.manifest.seeds if not self.finished(s)]

    def finished_records(self) -> dict[int, RunRecord]:
        """The records of the seeds that finished (what scoring counts)."""
        return {s: r for s, r in sorted(self.records.items()) if self.finished(s)}

    def save_manifest(self, manifest: Manifest) -> None:
        with writing(self.paths.manifest):
            atomic.write_json(self.paths.manifest, manifest.to_json())
        self.manifest = manifest
        self.sync()

    def save_summary(self, summary: Summary) -> None:
        with writing(self.paths.summary):
            atomic.write_json(self.paths.summary, summary.to_json())
        self.summary = summary
        self.sync()

    def save_decisions(self, decisions: DecisionLog) -> None:
        with writing(self.paths.decisions):
            atomic.write_json(self.paths.decisions, decisions.to_json())
        self.decisions = decisions

    def add_seed(self, seed: int) -> None:
        """One more seed for a run whose rule asks for it: its pending state, then the manifest
        listing it (a state without the manifest's mention is ignored, and overwritten here)."""
        state = SeedState(seed=seed, state=SeedStateName.PENDING)
        with writing(self.paths.seed(seed).state):
            atomic.write_json(self.paths.seed(seed).state, state.to_json())
        self.states[seed] = state
        self.save_manifest(self.manifest.model_copy(update={"seeds": (*self.manifest.seeds, seed)}))

    def save_seed(self, state: SeedState, record: RunRecord | None = None) -> None:
        """Write a seed's record (if any), then its state: the state is what says it finished."""
        seed = self.paths.seed(state.seed)
        with writing(seed.state):
            if record is not None:
                atomic.write_json(seed.record, record.to_json())
                self.records[state.seed] = record
            atomic.write_json(seed.state, state.to_json())
        self.states[state.seed] = state
        self.sync()

    def forget_record(self, seed: int) -> None:
        """The seed's record was archived with its attempt."""
        self.records.pop(seed, None)

    def sync(self, index: Index | None = None) -> None:
        """Write this run's rows into the index (the store's, or ``index``), from what this handle
        holds. While the run is written under its lock, an index another process holds does not stop
        it: the folders are written, and the next read catches the index up (`Store.refresh`)."""
        target = index or self.store.index
        telemetry = frozenset(seed for seed in self.manifest.seeds if self.paths.seed(seed).telemetry.is_file())
        try:
            target.write(self.manifest, self.summary, self.states, self.records, _run_mtime(self.paths.root),
                         telemetry=telemetry)
        except IndexBusy:
            if index is not None or self.lock is None:
                raise
            self.index_note = f"the index {target.path} was busy; it catches up at the next listing"


def _run_mtime(folder: str | Path, manifest_mtime: float | None = None, seeds: list[int] | None = None) -> float:
    """The newest modification time of the files a run's index rows come from (its manifest and
    summary, each seed's state and record): one stat each; the seed folders are listed unless
    ``seeds`` names them."""
    stamps = [manifest_mtime] if manifest_mtime is not None else []
    names = [SUMMARY_NAME] if manifest_mtime is not None else [MANIFEST_NAME, SUMMARY_NAME]
    files = [os.path.join(folder, name) for name in names]
    seeds_folder = os.path.join(folder, "seeds")
    if seeds is not None:
        folders = [os.path.join(seeds_folder, str(seed)) for seed in seeds]
    else:
        folders = []
        with contextlib.suppress(FileNotFoundError, NotADirectoryError), os.scandir(seeds_folder) as entries:
            folders = [entry.path for entry in entries if entry.is_dir()]
    files += [os.path.join(seed, name) for seed in folders for name in (STATE_NAME, RECORD_NAME)]
    for path in files:
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            stamps.append(os.stat(path).st_mtime)
    return max(stamps, default=0.0)
