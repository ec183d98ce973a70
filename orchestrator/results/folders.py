"""What every kind of stored run does alike with its folder: make it new and take its lock, and turn a
failed write into an infrastructure fault naming the file. Training runs (`results.store`) and
inference runs (`results.inference_store`) both use it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from orchestrator.errors import StoreError, StoreWriteError
from orchestrator.results.lock import RunLock


@contextlib.contextmanager
def writing(path: Path) -> Iterator[None]:
    """A failed write of a stored file is an infrastructure fault naming the file (disk full, quota...)."""
    try:
        yield
    except OSError as exc:
        raise StoreWriteError(f"cannot write {exc.filename or path}: {exc.strerror or exc}") from None


def new_locked(folder: Path, lock_path: Path, run_id: str, root: Path) -> RunLock:
    """Make a new run's folder (refused where one exists: a run id is never reused) and take its lock."""
    try:
        folder.mkdir(parents=True, exist_ok=False)
    except FileExistsError:
        raise StoreError(f"run {run_id} already exists in {root}") from None
    except OSError as exc:
        raise StoreWriteError(f"cannot create {folder}: {exc.strerror}") from None
    with writing(lock_path):
        return RunLock(lock_path, run_id)
