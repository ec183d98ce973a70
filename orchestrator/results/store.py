"""The run store: one results folder holding every kind of run (training runs, inference runs and
qualifications), with one layout (`orchestrator.results.paths`), one writer and one rule for a
failed write (`orchestrator.results.atomic`: exit 3 naming the file), one lock per run
(`orchestrator.results.lock`) and one SQLite index of the training and inference runs
(`orchestrator.results.index`: a cache, rebuilt from the folders whenever they are newer).

`Store` is the one way in: a training run is created or opened as a `StoredRun` (here), an inference
run as a `StoredInference` (`results.inference_run`), the qualifications are `Store.qualifications`
(`results.qualifications`). A run is written only through its handle, which keeps the files and the
index in step. Every file is validated as it is read (`results.record_reader`): a damaged or foreign file
is a `RecordError` naming the file and the field; a run or seed folder that is a link leading out of
its folder is refused. A run is written only under its lock: `create` takes it, `StoredRun.locked`
takes it for an existing run, `close` gives it up. An index another process holds, or that cannot be
written (a full disk), never fails a run whose files are written, nor a read: the next read catches up.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeVar

from orchestrator.config.locations import current_folder
from orchestrator.errors import RecordError, StoreError, UsageError
from orchestrator.results import atomic
from orchestrator.results.decisions import DecisionLog
from orchestrator.results.index import Index, IndexBusy, IndexUnsaved
from orchestrator.results.inference import InferenceRun
from orchestrator.results.inference_run import StoredInference
from orchestrator.results.inference_run import sync as sync_inference
from orchestrator.results.lock import RunLock, is_held
from orchestrator.results.paths import (
    INFERENCE_FILE,
    MANIFEST_NAME,
    RECORD_NAME,
    STATE_NAME,
    SUMMARY_NAME,
    InferencePaths,
    RunPaths,
    check_run_id,
    inside,
)
from orchestrator.results.qualifications import Qualifications
from orchestrator.results.record_reader import read_record
from orchestrator.results.records import Manifest, RunRecord, SeedState, SeedStateName, Summary

RUNNING, STOPPED = "running", "stopped"
NamesRun = TypeVar("NamesRun", Manifest, InferenceRun)
"""A record that makes a folder a run: a training run's manifest, an inference run's record."""


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def new_run_id(workload: str, profile: str) -> str:
    """``<workload>-<profile>-<UTC stamp>-<4 hex>``, in the characters a run id may hold."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    name = re.sub(r"[^A-Za-z0-9._-]|\.\.+", "_", f"{workload}-{profile}-{stamp}-{secrets.token_hex(2)}")
    return check_run_id(name.lstrip("._-"))


def check_results_dir(results_dir: Path, *, write: bool = True) -> None:
    """The results folder must be a folder this user can read (and, to ``write``, write), or one
    that can be made (nothing is made here). A link that leads nowhere, or in a loop, a name the file
    system cannot take, and a relative path from a current folder that was deleted are refused."""
    if any(ord(c) < 32 or ord(c) == 127 for c in str(results_dir)):
        raise StoreError(f"results folder {str(results_dir)!r} has a control character in its name")
    if not results_dir.is_absolute():
        current_folder()
    try:
        _check_results_dir(results_dir, write)
    except OSError as exc:  # a name over NAME_MAX, a path over PATH_MAX: nothing there can be made
        raise StoreError(f"results folder {results_dir}: {exc.strerror}") from None


def _check_results_dir(results_dir: Path, write: bool) -> None:
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
    """One results folder: every kind of run in it, one index of them."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.index = Index(root)
        self.qualifications = Qualifications(root)
        """The node qualifications and fleets (``<root>/qualify/``)."""

    def paths(self, run_id: str) -> RunPaths:
        """A run's paths; its folder, when it exists, must not lead out of the results folder."""
        return RunPaths(self._folder(run_id))

    def inference_paths(self, run_id: str) -> InferencePaths:
        """An inference run's paths (the same folder rules)."""
        return InferencePaths(self._folder(run_id))

    def _folder(self, run_id: str) -> Path:
        folder = self.root / check_run_id(run_id)
        if folder.is_symlink():
            inside(folder, self.root)
        return folder

    def kind(self, run_id: str) -> str | None:
        """``training`` (a manifest), ``inference`` (an inference record) or None (no such run)."""
        if self.paths(run_id).manifest.is_file():
            return "training"
        if self.inference_paths(run_id).record.is_file():
            return "inference"
        return None

    def is_inference(self, run_id: str) -> bool:
        return self.kind(run_id) == "inference"

    def run_ids(self) -> list[str]:
        """Folders holding a manifest, whatever its state."""
        if not self.root.is_dir():
            return []
        return sorted(p.parent.name for p in self.root.glob(f"*/{MANIFEST_NAME}"))

    @contextlib.contextmanager
    def _new_folder(self, folder: Path, lock: Path, run_id: str) -> Iterator[RunLock]:
        """Make a new run's folder (refused where one exists: a run id is never reused) and take its
        lock, for the block that writes the run's first files; a block that fails removes the folder
        (nothing half-written is left: the run never was)."""
        atomic.make_folder(folder.parent)
        try:
            folder.mkdir(exist_ok=False)
        except FileExistsError:
            if folder.is_dir():
                raise StoreError(f"run {run_id} already exists in {self.root}") from None
            raise StoreError(f"{folder} is {atomic.what_is(os.lstat(folder).st_mode)} where the folder of run"
                             f" {run_id} belongs; move it away") from None
        except OSError as exc:
            raise atomic.write_error(exc, folder) from None
        try:
            held = RunLock(lock, run_id)
            try:
                yield held
            except BaseException:
                held.release()
                raise
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise

    def create(self, manifest: Manifest) -> StoredRun:
        """Make the run's folder, lock it, write its manifest and a pending state per seed. The
        run is returned locked: `StoredRun.close` (or the end of the process) releases it. A write
        that fails leaves no folder behind."""
        paths = self.paths(manifest.run_id)
        with self._new_folder(paths.root, paths.lock, paths.run_id) as lock:
            run = StoredRun(self, paths, manifest, None, {}, {}, lock=lock)
            atomic.write_json(paths.manifest, manifest.to_json())
            for seed in manifest.seeds:
                state = SeedState(seed=seed, state=SeedStateName.PENDING)
                atomic.write_json(paths.seed(seed).state, state.to_json())
                run.states[seed] = state
        run.sync()
        return run

    def create_inference(self, record: InferenceRun) -> StoredInference:
        """Make an inference run's folder, lock it and write its record; returned locked. A write that
        fails leaves no folder behind."""
        paths = self.inference_paths(record.run_id)
        with self._new_folder(paths.root, paths.lock, paths.run_id) as lock:
            run = StoredInference(paths, record, lock, self.index)
            run.save(record)
        return run

    def manifest(self, run_id: str) -> Manifest:
        """A run's manifest alone, validated (what a comparison needs of a run besides its index rows)."""
        return self._run_record(self.paths(run_id).manifest, Manifest, "training")

    def open_inference(self, run_id: str) -> InferenceRun:
        """An inference run's record, validated; UsageError when there is no such run."""
        return self._run_record(self.inference_paths(run_id).record, InferenceRun, "inference")

    def _run_record(self, path: Path, model: type[NamesRun], kind: str) -> NamesRun:
        """The record that makes a folder a run of ``kind``, validated, naming its own folder."""
        run_id = path.parent.name
        record = read_record(path, model)
        if record is None:
            raise self._missing(run_id, kind)
        if record.run_id != run_id:
            raise RecordError(f"{path}: field run_id: {record.run_id!r} is not its folder's name")
        return record

    def _missing(self, run_id: str, wanted: str) -> UsageError:
        """Why ``run_id`` is not a run of the ``wanted`` kind, and what to use instead."""
        found = self.kind(run_id)
        if found == "inference":
            return UsageError(f"run {run_id} is an inference run: `mltrain show {run_id}` shows it, `mltrain infer`"
                              " makes another (score and --resume take training runs)")
        if found == "training":
            return UsageError(f"run {run_id} is a training run, not an inference run: `mltrain show {run_id}`"
                              " shows it")
        if any(self.qualifications.paths.nodes.glob(f"*/{run_id}.json")):
            return UsageError(f"{run_id} is a node qualification: `mltrain qualify history` shows it")
        known = self.run_ids()[-5:]
        hint = f" (runs here: {', '.join(known)})" if known else ""
        return UsageError(f"no {'inference ' if wanted == 'inference' else ''}run {run_id!r} in {self.root}{hint}")

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

    def state(self, run_id: str, stored: str | None) -> str:
        """A run's state as every command shows it: ``running`` on disk, but nobody holds its lock (its
        process is gone: killed, or its node lost), is ``stopped``."""
        if stored == RUNNING and not is_held(self.paths(run_id).lock):
            return STOPPED
        return stored or ""

    def refresh(self, index: Index | None = None) -> list[BrokenRun]:
        """Bring the index (this folder's, or ``index``) up to date with the folders: re-read only
        runs that changed, drop rows of runs whose folder is gone or damaged, all in one transaction.
        Returns the damaged ones. Training runs and inference runs alike."""
        index = index or self.index
        with index.batch():
            synced = index.synced()
            training, inference, unreadable = self._stamps(index.seed_numbers())
            broken = [BrokenRun(run_id, problem) for run_id, problem in unreadable.items()]
            for run_id, stamp in [*training.items(), *inference.items()]:
                is_training = run_id in training
                if synced.get(run_id) == stamp:
                    continue
                try:
                    if is_training:
                        self.open(run_id).sync(index, mtime=stamp)
                    else:
                        sync_inference(self.inference_paths(run_id), self.open_inference(run_id), index)
                except (RecordError, UsageError) as exc:
                    broken.append(BrokenRun(run_id, str(exc)))
                except OSError as exc:  # what a record's reader does not read itself: a folder's links, its listing
                    broken.append(BrokenRun(run_id, f"{exc.filename or run_id}: {exc.strerror or exc}"))
            index.forget((set(synced) - set(training) - set(inference)) | {b.run_id for b in broken})
        return broken

    def _stamps(self, seeds: dict[str, list[int]]) -> tuple[dict[str, float], dict[str, float], dict[str, str]]:
        """Each run folder's time (`_run_mtime`), training runs and inference runs apart, and the
        folders that cannot be read, each with its problem (named, the others listed): one pass
        over the folder, a few system calls per run (thousands of runs are listed in a blink).
        ``seeds``: each indexed run's seeds (a run that gains a seed rewrites its manifest, so the
        seed folders of a run the index knows need no listing)."""
        training: dict[str, float] = {}
        inference: dict[str, float] = {}
        unreadable: dict[str, str] = {}
        with os.scandir(self.root) as entries:
            names = sorted(e.name for e in entries if not e.name.startswith(".") and e.is_dir())
        root = str(self.root)
        for name in names:
            folder = f"{root}/{name}"  # (not os.path.join: thousands of runs)
            try:
                try:
                    manifest_mtime = os.stat(f"{folder}/{MANIFEST_NAME}").st_mtime
                except FileNotFoundError:
                    with contextlib.suppress(FileNotFoundError):
                        inference[name] = os.stat(f"{folder}/{INFERENCE_FILE}").st_mtime
                    continue
                training[name] = _run_mtime(folder, manifest_mtime, seeds.get(name))
            except OSError as exc:  # a folder this user may not read (EACCES), a loop of links (ELOOP)
                unreadable[name] = f"{exc.filename or folder}: {exc.strerror or exc}"
        return training, inference, unreadable

    def list(self, *, label: str | None = None, workload: str | None = None) -> Listing:
        """Runs, newest first, from the refreshed index, and the folders that could not be read.
        The index a writable folder keeps is saved by the first read; a read-only folder, one whose
        index another process holds, or one where it cannot be saved (a full disk), is indexed in
        memory (nothing is written)."""
        if not self.root.is_dir():
            return Listing([], [])
        note = ""
        index = self.index if self._may_write_index() else Index.in_memory(self.root)
        try:
            broken = self.refresh(index)
        except (IndexBusy, IndexUnsaved) as exc:
            note = f"{exc}: listed from the run folders"
            index = Index.in_memory(self.root)
            broken = self.refresh(index)
        rows = index.runs(label=label, workload=workload)
        for row in rows:
            row["state"] = self.state(row["run_id"], row["state"])
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
    """Set when a write of this run could not update the index (held by another process, or unwritable)."""

    @property
    def run_id(self) -> str:
        return self.paths.run_id

    @property
    def state(self) -> str:
        """The run's state as every command shows it (`Store.state`)."""
        return self.store.state(self.run_id, self.manifest.state)

    def locked(self) -> StoredRun:
        """This run, read again under its lock (RunBusy, naming the holder, when a live process
        holds it). Validate before locking: taking the lock writes the lock file."""
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
        atomic.write_json(self.paths.manifest, manifest.to_json())
        self.manifest = manifest
        self.sync()

    def save_summary(self, summary: Summary) -> None:
        atomic.write_json(self.paths.summary, summary.to_json())
        self.summary = summary
        self.sync()

    def save_decisions(self, decisions: DecisionLog) -> None:
        atomic.write_json(self.paths.decisions, decisions.to_json())
        self.decisions = decisions

    def add_seed(self, seed: int) -> None:
        """One more seed for a run whose rule asks for it: its pending state, then the manifest
        listing it (a state without the manifest's mention is ignored, and overwritten here)."""
        state = SeedState(seed=seed, state=SeedStateName.PENDING)
        atomic.write_json(self.paths.seed(seed).state, state.to_json())
        self.states[seed] = state
        self.save_manifest(self.manifest.model_copy(update={"seeds": (*self.manifest.seeds, seed)}))

    def save_seed(self, state: SeedState, record: RunRecord | None = None) -> None:
        """Write a seed's record (if any), then its state: the state is what says it finished."""
        seed = self.paths.seed(state.seed)
        if record is not None:
            atomic.write_json(seed.record, record.to_json())
            self.records[state.seed] = record
        atomic.write_json(seed.state, state.to_json())
        self.states[state.seed] = state
        self.sync()

    def forget_record(self, seed: int) -> None:
        """The seed's record was archived with its attempt."""
        self.records.pop(seed, None)

    def sync(self, index: Index | None = None, *, mtime: float | None = None) -> None:
        """Write this run's rows into ``index`` (a refresh's, whose errors are its caller's), or into
        the store's index, which cannot fail the run: the folders are written, and an index another
        process holds, or one a full disk cannot take, catches up at the next read (`Store.refresh`).
        ``mtime``: the run's time as the refresh found it before reading the run (`_run_mtime`)."""
        telemetry = frozenset(seed for seed in self.manifest.seeds if self.paths.seed(seed).telemetry.is_file())

        def write(target: Index) -> None:
            stamp = _run_mtime(self.paths.root) if mtime is None else mtime
            target.write(self.manifest, self.summary, self.states, self.records, stamp, telemetry=telemetry)

        if index is not None:
            write(index)
        else:
            self.index_note = self.store.index.write_or_defer(write) or self.index_note


def _run_mtime(folder: str | Path, manifest_mtime: float | None = None, seeds: list[int] | None = None) -> float:
    """The newest modification time of the files a run's index rows come from (its manifest and
    summary, each seed's state and record): one stat each; the seed folders are listed unless
    ``seeds`` names them."""
    stamps = [manifest_mtime] if manifest_mtime is not None else []
    names = [SUMMARY_NAME] if manifest_mtime is not None else [MANIFEST_NAME, SUMMARY_NAME]
    files = [f"{folder}/{name}" for name in names]  # (not os.path.join: thousands of runs, a few each)
    seeds_folder = f"{folder}/seeds"
    if seeds is not None:
        folders = [f"{seeds_folder}/{seed}" for seed in seeds]
    else:
        folders = []
        with contextlib.suppress(FileNotFoundError, NotADirectoryError), os.scandir(seeds_folder) as entries:
            folders = [entry.path for entry in entries if entry.is_dir()]
    files += [f"{seed}/{name}" for seed in folders for name in (STATE_NAME, RECORD_NAME)]
    stat = os.stat
    for path in files:  # a try per file, not a context manager: eight files a run, thousands of runs
        try:
            stamps.append(stat(path).st_mtime)
        except (FileNotFoundError, NotADirectoryError):
            continue
    return max(stamps, default=0.0)
