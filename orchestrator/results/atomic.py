"""The only writer: a crash, a Ctrl-C or a power cut never leaves a half-written file, no file is
written through a link, and a failed write is one line naming the file.

A file is written to a temporary file beside it, flushed to disk, renamed over its name, and the
folder itself is flushed so that the rename survives a power cut too. `staged` opens the temporary
file first, so that a target that cannot be written fails before any work is spent on its content.

Two rules hold for every file mltrain writes (a run's files, a lock, an index, a report):

- Where a file is written, only a regular file (or nothing) may stand: a symbolic link, a folder, a
  FIFO or a device in its place is refused (`NotAFile`, exit 2) and left as it is. A rename replaces
  a link rather than writing through it, and files opened in place (`open_append`, the locks) are
  opened with ``O_NOFOLLOW``: a store shared by someone else, or unpacked from an archive, cannot
  make mltrain write, append to or truncate a file elsewhere.
- A write that fails is `StoreWriteError` (exit 3, an infrastructure fault: a full disk, a quota, a
  read-only file system) naming the file, or `StoreError` (exit 2) where the layout itself is wrong
  (a file where a folder belongs, a name too long). `writing` is that rule for any other write.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from orchestrator.config.reading import what_is
from orchestrator.errors import MltrainError, StoreError, StoreWriteError

NOFOLLOW = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
"""How mltrain opens a file in place: never through a link, never blocked by a FIFO."""
_LAYOUT = {errno.ENOTDIR, errno.EISDIR, errno.EEXIST, errno.ELOOP, errno.ENAMETOOLONG}
"""A write refused by what stands in the folder, not by the medium: bad input (exit 2)."""
FAILED_WRITES = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS})
"""A write the medium refused (full, over quota, too big, read-only): an infrastructure fault (exit 3)
wherever it happens (`orchestrator.cli` says so of any write outside this module too)."""
_MEDIUM = FAILED_WRITES | {errno.EIO}
"""A write the medium refused (full, over quota, too big, read-only, failing)."""


class NotAFile(StoreError):
    """A link, a folder, a FIFO or a device where mltrain writes (or locks) a regular file."""


def not_a_file(path: Path | str, mode: int) -> NotAFile:
    """The one refusal of a non-regular file where mltrain writes one."""
    return NotAFile(f"{path} is {what_is(mode)}, not a file mltrain wrote: remove it (or move it away) and try"
                    " again")


def check_regular(path: Path) -> None:
    """``path`` is a regular file or nothing (its last component is not followed); `NotAFile` otherwise."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise write_error(exc, path) from None
    if not stat.S_ISREG(mode):
        raise not_a_file(path, mode)


def is_empty_file(path: Path) -> bool:
    """Whether ``path`` is a regular file holding nothing (its last component not followed)."""
    try:
        found = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(found.st_mode) and found.st_size == 0


def write_error(exc: OSError, path: Path | str) -> MltrainError:
    """The one rule for a failed write: exit 3 naming the file, or exit 2 where the layout is at fault."""
    named = Path(path)
    if isinstance(exc.filename, str) and not Path(exc.filename).name.startswith(f".{named.name}."):
        named = Path(exc.filename)  # a file the write went through (not its staged copy)
    why = exc.strerror or str(exc)
    if exc.errno == errno.ELOOP:
        return not_a_file(named, stat.S_IFLNK)
    if exc.errno == errno.ENAMETOOLONG:
        return StoreError(f"cannot write {named}: its name is too long for the file system ({why})")
    if exc.errno in _LAYOUT:
        blocker = _first_non_folder(named)
        if blocker is not None:
            return StoreError(f"cannot write {named}: {blocker} is {what_is(os.lstat(blocker).st_mode)} where a"
                              " folder belongs; move it away")
        return StoreError(f"cannot write {named}: {why}")
    return StoreWriteError(f"cannot write {named}: {why}")


def _first_non_folder(path: Path) -> Path | None:
    """The nearest existing ancestor of ``path`` (or ``path``'s parent itself) that is not a folder."""
    for parent in [*reversed(path.parents)]:
        try:
            mode = os.stat(parent).st_mode
        except FileNotFoundError:
            return None
        except OSError:
            return parent if os.path.lexists(parent) else None
        if not stat.S_ISDIR(mode):
            return parent
    return None


@contextlib.contextmanager
def writing(path: Path | str) -> Iterator[None]:
    """A write done here that fails (an OSError) is `write_error`'s: exit 3 naming the file, or exit 2."""
    try:
        yield
    except OSError as exc:
        raise write_error(exc, path) from None


def make_folder(path: Path) -> Path:
    """Make ``path`` and its parents (links to folders followed); `write_error`'s errors."""
    with writing(path):
        path.mkdir(parents=True, exist_ok=True)
    return path


@contextlib.contextmanager
def staged(path: Path) -> Iterator[BinaryIO]:
    """A temporary file beside ``path``, opened now (its ``name`` is its own path, for a checker that
    reads it before it counts); renamed over ``path`` when the block ends without an error, removed
    when it ends with one. `NotAFile` when something other than a regular file stands at ``path``;
    `write_error`'s errors when the folder cannot take it."""
    check_regular(path)
    make_folder(path.parent)
    with writing(path):
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with writing(path):
            os.fchmod(fd, 0o666 & ~_umask())  # as an ordinary open() would; mkstemp makes 0600
            os.close(fd)
            handle = open(tmp, "r+b", opener=_nofollow)  # noqa: SIM115 - by its path (handle.name); closed below
        try:
            with handle:
                yield handle
                handle.flush()
                os.fsync(handle.fileno())
        except OSError as exc:  # the block's writes, the flush, the close: the medium refused this file
            if exc.errno in _MEDIUM:
                raise write_error(exc, path) from None
            raise
        check_regular(path)
        with writing(path):
            os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_folder(path.parent)


def _nofollow(path: str, flags: int) -> int:
    return os.open(path, flags | NOFOLLOW)


def open_in_place(path: Path, flags: int) -> int:
    """``path`` opened with ``flags`` (made when ``os.O_CREAT`` is among them), never through a link
    nor blocked by a FIFO; a descriptor of a regular file. `NotAFile` for anything else there,
    `write_error`'s errors when it cannot be opened."""
    try:
        fd = os.open(path, flags | NOFOLLOW, 0o666)
    except OSError as exc:
        if os.path.lexists(path) and not stat.S_ISREG(mode := os.lstat(path).st_mode):
            raise not_a_file(path, mode) from None  # ELOOP, EISDIR, ENXIO (a FIFO nobody reads, a socket)
        raise write_error(exc, path) from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise not_a_file(path, mode)
    return fd


def open_append(path: Path) -> BinaryIO:
    """``path`` opened to append to (made when missing), never through a link: a log that grows as a
    job prints. `NotAFile` or `write_error`'s errors."""
    return os.fdopen(open_in_place(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT), "ab")


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
    flush the folders that hold both names so the rename survives a power cut. `NotAFile` when a
    link stands at ``target``; `write_error`'s errors as the rename fails (a non-empty folder at
    ``target``, another file system)."""
    if os.path.islink(target):
        raise not_a_file(target, os.lstat(target).st_mode)
    with writing(target):
        os.replace(source, target)
        fsync_folder(target.parent)
        if source.parent != target.parent:
            fsync_folder(source.parent)


def write_bytes(path: Path, data: bytes) -> None:
    """Write to a temp file in the same folder, fsync, rename over ``path``, fsync the folder."""
    with staged(path) as handle, writing(path):
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
