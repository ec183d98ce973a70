"""The run store: one results folder holding every kind of run (training runs, inference runs and
qualifications), with one layout (`orchestrator.results.paths`), one writer and one rule for a
failed write (`orchestrator.results.atomic`: exit 3 naming the file), one lock per run
(`orchestrator.results.lock`) and one SQLite index of the training and inference runs
(`orchestrator.results.index`: a cache, rebuilt from the folders whenever they are newer).

`Store` is the one way in: a training run is created or opened as a `StoredRun`
(`results.stored_run`), an inference run as a `StoredInference` (`results.inference_run`), the
qualifications are `Store.qualifications` (`results.qualifications`); a listing refreshes the index
(`results.refresh`). A run is written only through its handle, which keeps the files and the
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
from datetime import datetime, timezone
from pathlib import Path
from typing import TypeVar

from orchestrator import collector
from orchestrator.config.locations import current_folder
from orchestrator.errors import RecordError, StoreError, UsageError
from orchestrator.results import atomic
from orchestrator.results.decisions import DecisionLog
from orchestrator.results.index import Index, IndexBusy, IndexUnsaved
from orchestrator.results.inference import InferenceRun
from orchestrator.results.inference_run import StoredInference
from orchestrator.results.lock import RunLock, is_held
from orchestrator.results.paths import MANIFEST_NAME, InferencePaths, RunPaths, check_run_id, inside
from orchestrator.results.qualifications import Qualifications
from orchestrator.results.record_reader import read_record
from orchestrator.results.records import Manifest, RunRecord, SeedState, SeedStateName, Summary
from orchestrator.results.refresh import BrokenRun, Listing, refresh
from orchestrator.results.stored_run import StoredRun

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
        that fails, or a stop signal before it returns, leaves no folder behind: the run never was."""
        paths = self.paths(manifest.run_id)
        with self._new_folder(paths.root, paths.lock, paths.run_id) as lock:
            run = StoredRun(self, paths, manifest, None, {}, {}, lock=lock)
            atomic.write_json(paths.manifest, manifest.to_json())
            for seed in manifest.seeds:
                state = SeedState(seed=seed, state=SeedStateName.PENDING)
                atomic.write_json(paths.seed(seed).state, state.to_json())
                run.states[seed] = state
            run.sync()  # within: a stop here had left a run 'running' that its caller said was never stored
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
        """Bring the index (this folder's, or ``index``) up to date with the folders (`results.refresh`);
        the damaged runs."""
        return refresh(self, index or self.index)

    def list(self, *, label: str | None = None, workload: str | None = None, newest: int | None = None) -> Listing:
        """Runs, newest first, from the refreshed index, and the folders that could not be read
        (``newest``: only that many rows, and the count of all: a table of the newest 50 of 100,000
        runs builds 50 rows, not 100,000).
        The index a writable folder keeps is saved by the first read; a read-only folder, one whose
        index another process holds, or one where it cannot be saved (a full disk), is indexed in
        memory (nothing is written)."""
        if not self.root.is_dir():
            return Listing([], [])
        note = ""
        index = self.index if self._may_write_index() else Index.in_memory(self.root)
        with collector.paused():  # thousands of rows, no cycle among them
            try:
                broken = self.refresh(index)
            except (IndexBusy, IndexUnsaved) as exc:
                note = f"{exc}: listed from the run folders"
                index = Index.in_memory(self.root)
                broken = self.refresh(index)
            rows = index.runs(label=label, workload=workload, newest=newest)
            total = len(rows) if newest is None else index.count(label=label, workload=workload)
            for row in rows:
                row["state"] = self.state(row["run_id"], row["state"])
        return Listing(rows, broken, index, note, total)

    def _may_write_index(self) -> bool:
        if not os.access(self.root, os.W_OK):
            return False
        return not self.index.path.exists() or os.access(self.index.path, os.W_OK)
