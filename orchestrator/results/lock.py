"""One lock per run: the process that runs (or resumes, or rescores) a run holds its lock file
(``run.lock`` of a training or an inference run, ``qualify.lock`` of a qualification or a fleet).

The lock is an ``fcntl.flock`` on the file, so the kernel releases it when its holder dies, however
it dies; the file's content says who holds it (host, PID, start time, command) so that a refused
process can name the holder. Content left by a holder that did not release (SIGKILL, a lost node)
is a stale lock: the next process takes it over and says so.

A lock file is opened without following links and must be a regular file (`orchestrator.results.atomic`'s
rule for every file mltrain writes): a link, a folder or a FIFO in its place is refused, naming it, and
left as it is, so that a shared or unpacked results folder cannot make mltrain truncate a file elsewhere.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import socket
import stat
import sys
import weakref
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from orchestrator.config.reading import parse_json
from orchestrator.errors import RunBusy, StoreError
from orchestrator.results.atomic import NOFOLLOW, open_in_place, write_error


@dataclass(frozen=True)
class Holder:
    """Who holds (or held) a run's lock."""

    host: str
    pid: int
    started_at: str
    command: str = ""

    def describe(self) -> str:
        return f"PID {self.pid} on {self.host} (since {self.started_at}{', ' + self.command if self.command else ''})"

    def gone(self) -> bool | None:
        """Whether the holder process has ended (None: it ran on another host, so we cannot tell)."""
        if self.host != socket.gethostname():
            return None
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False


def _me() -> Holder:
    return Holder(
        host=socket.gethostname(), pid=os.getpid(),
        started_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        command=" ".join(["mltrain", *sys.argv[1:]])[:200],
    )


def _read(fd: int) -> Holder | None:
    try:
        data = parse_json(os.pread(fd, 4096, 0) or b"null")
        return Holder(host=str(data["host"]), pid=int(data["pid"]), started_at=str(data["started_at"]),
                      command=str(data.get("command", "")))
    except (OSError, ValueError, TypeError, KeyError):
        return None


def _release(fd: int) -> None:
    """Clear the holder and unlock (also run by the finalizer when a lock is dropped or at exit)."""
    with contextlib.suppress(OSError):
        os.ftruncate(fd, 0)
    with contextlib.suppress(OSError):
        os.close(fd)  # closing the last descriptor releases the flock


def is_held(path: Path) -> bool:
    """Whether a live process holds the lock at ``path`` (probed without writing anything); never
    for a link or anything but a regular file, which no lock is."""
    try:
        fd = os.open(path, os.O_RDONLY | NOFOLLOW)
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False


class RunLock:
    """The held lock of one run; `release` (or the end of the process) gives it up."""

    def __init__(self, path: Path, run_id: str) -> None:
        self.path = path
        self.note = ""
        """Set when a stale lock was taken over: whose it was."""
        fd = open_in_place(path, os.O_RDWR | os.O_CREAT)  # a regular file, never a link's target
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read(fd)
            os.close(fd)
            who = holder.describe() if holder else "another process that has not yet said who it is"
            stop = f" or stop it (kill {holder.pid}) and resume" if holder and holder.host == socket.gethostname() \
                else ""
            raise RunBusy(f"run {run_id} is in use by {who}: wait for it to end{stop}") from None
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.ENOLCK, errno.EOPNOTSUPP):
                raise StoreError(f"{path}: this file system cannot lock files ({exc.strerror}); keep results on"
                                 " a local disk or an NFS mount with locking") from None
            raise write_error(exc, path) from None
        stale = _read(fd)
        if stale is not None:
            why = {True: "that process is gone", None: "it ran on another host and no longer holds it",
                   False: "it no longer holds it"}[stale.gone()]
            self.note = f"took over the lock of run {run_id} left by {stale.describe()}: {why}"
        me = json.dumps(_me().__dict__).encode()
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, me, 0)
            os.fsync(fd)
        except OSError as exc:
            _release(fd)
            raise write_error(exc, path) from None
        self._fd = fd
        self._finalizer = weakref.finalize(self, _release, fd)

    def release(self) -> None:
        """Give the lock up (idempotent)."""
        self._finalizer()

    @property
    def held(self) -> bool:
        return self._finalizer.alive
