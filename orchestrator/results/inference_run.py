"""An inference run being written: its record as it stands, the lock that lets this process write
it, and its index row kept in step. Made by `Store.create_inference`, read by `Store.open_inference`."""

from __future__ import annotations

import shutil
from dataclasses import dataclass

from orchestrator.results import atomic
from orchestrator.results.index import Index
from orchestrator.results.inference import InferenceRun
from orchestrator.results.lock import RunLock
from orchestrator.results.paths import InferencePaths


@dataclass
class StoredInference:
    """An inference run on disk while it runs, and the one way to write it (under its lock)."""

    paths: InferencePaths
    record: InferenceRun
    lock: RunLock
    index: Index
    index_note: str = ""
    """Set when a write could not update the index (held by another process, or unwritable)."""

    @property
    def run_id(self) -> str:
        return self.paths.run_id

    def save(self, record: InferenceRun) -> None:
        """The record written (exit 3 naming the file when it cannot be), then its index row: an index
        that cannot take it does not fail the run, whose folder is the truth."""
        atomic.write_json(self.paths.record, record.to_json())
        self.record = record
        self.index_note = self.index.write_or_defer(lambda index: sync(self.paths, record, index))

    def discard(self) -> None:
        """Remove the run altogether (it produced nothing: the harness refused its input)."""
        self.lock.release()
        shutil.rmtree(self.paths.root, ignore_errors=True)
        self.index.write_or_defer(lambda index: index.forget({self.run_id}))

    def close(self) -> None:
        self.lock.release()


def mtime(where: InferencePaths) -> float:
    return where.record.stat().st_mtime if where.record.exists() else 0.0


def sync(where: InferencePaths, record: InferenceRun, index: Index) -> None:
    """The run's row in ``index``, from ``record``."""
    index.write_inference(record, mtime(where))
