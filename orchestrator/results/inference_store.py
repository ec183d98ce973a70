"""Inference runs in a results folder: one folder per run beside the training runs, found by its
``inference.json`` (a training run has a ``manifest.json``), indexed in the same SQLite index.

A run is created locked (`create`), written only through its `InferenceHandle` while the lock is
held, and read validated (`open`). The index rows come from the record, so `list` shows both kinds.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from orchestrator.errors import RecordError, UsageError
from orchestrator.results import atomic
from orchestrator.results.folders import new_locked, writing
from orchestrator.results.index import Index
from orchestrator.results.inference import INFERENCE_FILE, InferencePaths, InferenceRun
from orchestrator.results.lock import RunLock
from orchestrator.results.paths import check_run_id, inside


def run_ids(root: Path) -> list[str]:
    return sorted(p.parent.name for p in root.glob(f"*/{INFERENCE_FILE}")) if root.is_dir() else []


def paths(root: Path, run_id: str) -> InferencePaths:
    folder = root / check_run_id(run_id)
    if folder.is_symlink():
        inside(folder, root)
    return InferencePaths(folder)


def is_inference(root: Path, run_id: str) -> bool:
    return paths(root, run_id).record.is_file()


def open_run(root: Path, run_id: str) -> InferenceRun:
    """The stored record, validated; UsageError when there is no such run."""
    from orchestrator.results.store import read_record  # the one reader of stored files

    where = paths(root, run_id)
    record = read_record(where.record, InferenceRun)
    if record is None:
        raise UsageError(f"no inference run {run_id!r} in {root}")
    if record.run_id != where.root.name:
        raise RecordError(f"{where.record}: field run_id: {record.run_id!r} is not its folder's name")
    return record


@dataclass
class InferenceHandle:
    """A run being written: its record as it stands and the lock that lets this process write it."""

    root: Path
    paths: InferencePaths
    record: InferenceRun
    lock: RunLock

    def save(self, record: InferenceRun) -> None:
        with writing(self.paths.record):
            atomic.write_json(self.paths.record, record.to_json())
        self.record = record
        sync(self.root, record, Index(self.root))

    def discard(self) -> None:
        """Remove the run altogether (it produced nothing: the harness refused its input)."""
        self.lock.release()
        shutil.rmtree(self.paths.root, ignore_errors=True)
        Index(self.root).forget({self.record.run_id})

    def close(self) -> None:
        self.lock.release()


def create(root: Path, record: InferenceRun) -> InferenceHandle:
    where = paths(root, record.run_id)
    lock = new_locked(where.root, where.lock, record.run_id, root)
    handle = InferenceHandle(root, where, record, lock)
    handle.save(record)
    return handle


def mtime(where: InferencePaths) -> float:
    return where.record.stat().st_mtime if where.record.exists() else 0.0


def sync(root: Path, record: InferenceRun, index: Index) -> None:
    index.write_inference(record, mtime(paths(root, record.run_id)))
