"""Files and folders a user names for mltrain to write (``report --out``, ``qualify --junit`` and
``--prometheus``, ``qualify history --html``, ``sysinfo --system-desc`` and ``--record-gpu-trace``,
``export --mlcommons``): checked before any work is spent, written whole or not at all.

The results folder is the store's own: its run folders, ``index.db`` and qualification records are
the truth every other command reads, so no output path may point into it (a report written over a
run's ``manifest.json`` would lose the run; a JUnit file over ``index.db`` the index). An output
replaces only a regular file (never a device node, a FIFO or a link, which a rename would replace
by a file), never a file the same command reads (``--references``, the ``qualify.yaml`` in use),
and never another output of the same command (`check_distinct`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from collections.abc import Mapping
from pathlib import Path

from orchestrator.config.reading import NOT_PLAIN, what_is
from orchestrator.errors import StoreWriteError, UsageError
from orchestrator.results import atomic

_FULL = (errno.ENOSPC, errno.EDQUOT)


def check_output_file(path: Path, *, option: str, results: Path | None = None) -> Path:
    """``path`` names a file mltrain may write: a name, not a folder, in a folder this user can
    write (or can make), outside the results folder. UsageError naming ``option`` otherwise."""
    if not path.name or str(path) in (".", ".."):
        raise UsageError(f"{option}: name the file to write")
    if path.is_dir():
        raise UsageError(f"{option} {path} is a folder: name the file to write")
    _check_replaceable(path, option)
    _check_outside_store(path, option, results)
    _check_writable_parent(path, option)
    return path


def check_output_folder(path: Path, *, option: str, results: Path | None = None) -> Path:
    """``path`` names a folder mltrain may write into (existing, or one it can make), outside the
    results folder. UsageError naming ``option`` otherwise."""
    if not str(path):
        raise UsageError(f"{option}: name the folder to write into")
    if path.exists() and not path.is_dir():
        raise UsageError(f"{option} {path}: not a folder")
    _check_outside_store(path, option, results)
    if path.is_dir():
        _try_writing_in(path, path, option)
    else:
        _check_writable_parent(path, option)
    return path


def check_distinct(outputs: Mapping[str, Path | None], inputs: Mapping[str, Path | None]) -> None:
    """No two ``outputs`` (option -> path) are one file, and none is one of the ``inputs`` (what names
    it -> path) the command reads: UsageError naming both."""
    named = [(option, path) for option, path in outputs.items() if path is not None]
    for k, (option, path) in enumerate(named):
        for other, other_path in named[:k]:
            if _same_file(path, other_path):
                raise UsageError(f"{option} {path} and {other} {other_path} are one file: give each its own")
        for what, source in inputs.items():
            if source is not None and _same_file(path, source):
                raise UsageError(f"{option} {path} is {what}, which this command reads: write it elsewhere")


def write_output(path: Path, data: bytes | str, *, option: str) -> None:
    """Write a checked output file atomically; a full disk is an infrastructure fault, any other
    refusal (a path that changed since the check) one line naming the option."""
    _check_replaceable(path, option)
    try:
        atomic.write_bytes(path, data.encode() if isinstance(data, str) else data)
    except OSError as exc:
        if exc.errno in _FULL:
            raise StoreWriteError(f"{option} {path}: cannot write ({exc.strerror})") from None
        raise UsageError(f"{option} {path}: cannot write there ({exc.strerror or exc})") from None


def _check_replaceable(path: Path, option: str) -> None:
    """An output replaces only a regular file: the rename that writes it whole would put a file where
    a device node, a FIFO, a socket or a link was (``--junit /dev/full`` as root: the system's entry)."""
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise UsageError(f"{option} {path}: cannot check it ({exc.strerror or exc})") from None
    if stat.S_ISLNK(mode):
        raise UsageError(f"{option} {path} is a link, which writing would replace: name the file itself")
    if not stat.S_ISREG(mode):
        raise UsageError(f"{option} {path} is not a regular file ({what_is(mode, NOT_PLAIN)}): name a file to write")


def _same_file(a: Path, b: Path) -> bool:
    """One file under two names: the same inode where both exist (hard links, links, ./x and x),
    else the same path once resolved."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        try:
            return a.resolve() == b.resolve()
        except (OSError, RuntimeError):
            return False


def _check_writable_parent(path: Path, option: str) -> None:
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        if parent.is_symlink():  # a dangling link: nothing can be made through it
            raise UsageError(f"{option} {path}: {parent} is a broken link")
        parent = parent.parent
    if not parent.is_dir():
        raise UsageError(f"{option} {path}: {parent} is not a folder")
    _try_writing_in(parent, path, option)


def _try_writing_in(folder: Path, path: Path, option: str) -> None:
    """Make and remove a file in ``folder``: permissions say too little (root may "write" /proc, a
    read-only mount grants the bits). The folder's times are put back: nothing is left changed."""
    before = folder.stat()
    try:
        fd, probe = tempfile.mkstemp(prefix=".mltrain-probe-", dir=folder)
    except OSError as exc:
        raise UsageError(f"{option} {path}: cannot write in {folder} ({exc.strerror or exc})") from None
    os.close(fd)
    os.unlink(probe)
    with contextlib.suppress(OSError):
        os.utime(folder, ns=(before.st_atime_ns, before.st_mtime_ns))


def _check_outside_store(path: Path, option: str, results: Path | None) -> None:
    if results is None or not results.exists():
        return
    try:
        target, store = path.resolve(), results.resolve()
    except (OSError, RuntimeError) as exc:  # a symlink loop
        raise UsageError(f"{option} {path}: cannot resolve ({exc})") from None
    if target == store or target.is_relative_to(store):
        raise UsageError(f"{option} {path} is inside the results folder {results}, whose files mltrain keeps:"
                         " write it elsewhere")
