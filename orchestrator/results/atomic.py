"""Atomic file writes: a crash, a Ctrl-C or a power cut never leaves a half-written file.

A file is written to a temporary file beside it, flushed to disk, renamed over its name, and the
folder itself is flushed so that the rename survives a power cut too. `staged` opens the temporary
file first, so that a target that cannot be written fails before any work is spent on its content.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO


@contextlib.contextmanager
def staged(path: Path) -> Iterator[BinaryIO]:
    """A temporary file beside ``path``, opened now (its ``name`` is its own path, for a checker that
    reads it before it counts); renamed over ``path`` when the block ends without an error, removed
    when it ends with one. OSError when the folder cannot take it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # as an ordinary open() would; mkstemp makes 0600
        os.close(fd)
        with open(tmp, "r+b") as handle:  # opened by its path, so that handle.name is the staged path
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_folder(path.parent)


def fsync_folder(folder: Path) -> None:
    """Flush a folder's entries (a rename, a new file) to disk."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    except OSError:
        pass  # some file systems cannot sync a folder; the file itself is synced
    finally:
        os.close(fd)


def move(source: Path, target: Path) -> None:
    """Rename a finished file or staged folder onto ``target`` in one step (same file system), then
    flush the folders that hold both names so the rename survives a power cut. OSError as the rename
    raises it (a non-empty folder at ``target``, another file system)."""
    os.replace(source, target)
    fsync_folder(target.parent)
    if source.parent != target.parent:
        fsync_folder(source.parent)


def write_bytes(path: Path, data: bytes) -> None:
    """Write to a temp file in the same folder, fsync, rename over ``path``, fsync the folder."""
    with staged(path) as handle:
        handle.write(data)


def _umask() -> int:
    """The process umask, read without changing it (os.umask would, for every thread)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except OSError:
        pass
    return 0o022


def write_text(path: Path, text: str) -> None:
    write_bytes(path, text.encode())


def write_json(path: Path, value: Any) -> None:
    write_text(path, json.dumps(value, indent=2, sort_keys=True, default=str) + "\n")
