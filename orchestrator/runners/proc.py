"""The one way mltrain starts processes: argv lists (never a shell string), own process group,
bounded time, and a clean stop of the whole group.

A stop signal is taken only once a process has started (`_started`): raised between the fork and
the exec, it lost the handle while the process, not yet carrying its mark, went on to run.

A seed's process dies with mltrain (`spawn` asks the kernel for SIGKILL when its parent dies), and
it carries a mark in its environment (`MARK_ENV`) by which a later mltrain finds whatever a killed
one left of a run, its children included (`find_marked`, `kill_marked`).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from orchestrator import signals
from orchestrator.errors import ConfigError

TERM_GRACE_S = 10.0
MARK_ENV = "MLTRAIN_RUN_ID"
"""Set in every local seed process: the run it belongs to."""
JOB_MARK_ENV = "MLTRAIN_JOB_MARK"
"""Set in every local job's processes: that one job (its leftovers, once it ended, are found by it)."""
_PR_SET_PDEATHSIG = 1
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None


class ProgramNotFound(ConfigError):
    """A program a workload declares (its run or dataset command) is not installed."""


def check_program(argv: Sequence[str], where: str) -> None:
    """ProgramNotFound, naming ``where`` it was declared, unless argv[0] can be started."""
    program = resolve_argv(argv)[0]
    if shutil.which(program) is None:
        raise ProgramNotFound(f"{where}: program {program!r} not found (install it or put it on PATH)")


def resolve_argv(argv: Sequence[str]) -> list[str]:
    """A leading ``python`` means the interpreter running mltrain."""
    args = list(argv)
    if args and args[0] == "python":
        args[0] = sys.executable
    return args


OWN_SETTINGS = {"OPENBLAS_NUM_THREADS": "1"}
"""Settings of mltrain's own process, never of what it starts. mltrain multiplies no matrices, yet
numpy's OpenBLAS starts a thread per CPU when numpy is imported, each spinning on its CPU before it
sleeps: 0.1 to 0.2 s of the CPU of every `compare` and `report` on 2 CPUs, a thread more per CPU more."""
OWN_SETTINGS_ENV = "MLTRAIN_OWN_SETTINGS"
"""The names of `OWN_SETTINGS` that `own_settings` set (the user had not), which `child_env` leaves out."""


def own_settings() -> None:
    """Give this process `OWN_SETTINGS` the user has not set; called by the command line before
    anything imports numpy. What mltrain starts gets the environment as the user gave it (`child_env`)."""
    added = [name for name in OWN_SETTINGS if name not in os.environ]
    if added and OWN_SETTINGS_ENV not in os.environ:
        os.environ.update({name: OWN_SETTINGS[name] for name in added})
        os.environ[OWN_SETTINGS_ENV] = ",".join(added)


def child_env(extra: Mapping[str, str], *, pythonpath: Path | None = None) -> dict[str, str]:
    """This process's environment as the user gave it (without `own_settings`), with mltrain's
    interpreter first on PATH, plus ``extra``."""
    env = dict(os.environ)
    for name in env.pop(OWN_SETTINGS_ENV, "").split(","):
        if name in OWN_SETTINGS and env.get(name) == OWN_SETTINGS[name]:  # (the mark names no other variable)
            del env[name]
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    if pythonpath is not None:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(pythonpath), env.get("PYTHONPATH", "")) if p)
    env.update(extra)
    return env


def run(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout_s: float,
    capture: bool = True,
    stdout_to_stderr: bool = False,
) -> subprocess.CompletedProcess[str]:
    """Run to completion in its own process group; the group is killed on timeout or Ctrl-C.
    ``capture``: keep stdout and stderr; else they are the terminal's, and with
    ``stdout_to_stderr`` the child's stdout goes to our stderr (so ours can hold only data)."""
    stream = subprocess.PIPE if capture else None
    stdout = stream if capture or not stdout_to_stderr else _stderr_fd()
    with _starting(argv), _started(argv, cwd=cwd, env=dict(env), stdout=stdout, stderr=stream, text=True) as proc:
        out, err = proc.communicate(timeout=timeout_s)
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def run_streaming(
    argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], timeout_s: float, on_line: Callable[[str], None],
) -> subprocess.CompletedProcess[str]:
    """Run to completion in its own process group, keeping stdout and handing each line of stderr
    to ``on_line`` as it comes (stderr is kept too). The group is killed on timeout or Ctrl-C."""
    with _started(argv, cwd=cwd, env=dict(env), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                  stderr=subprocess.PIPE, text=True) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        out: list[str] = []
        err: list[str] = []
        readers = [
            threading.Thread(target=lambda: out.append(proc.stdout.read()), daemon=True),  # type: ignore[union-attr]
            threading.Thread(target=_lines, args=(proc.stderr, err, on_line), daemon=True),
        ]
        for reader in readers:
            reader.start()
        code = proc.wait(timeout=timeout_s)
        for reader in readers:
            reader.join()
        proc.stdout.close()
        proc.stderr.close()
        return subprocess.CompletedProcess(proc.args, code, "".join(out), "".join(err))


def _lines(stream: IO[str], kept: list[str], on_line: Callable[[str], None]) -> None:
    for line in stream:
        kept.append(line)
        on_line(line.rstrip("\n"))


def spawn(argv: Sequence[str], *, cwd: Path, env: Mapping[str, str]) -> subprocess.Popen[bytes]:
    """Start with stdout and stderr merged into one pipe, in a new session (so a Ctrl-C in the
    terminal reaches mltrain only, which then stops the run in order). The process is killed when
    the thread that started it ends (the kernel's parent-death signal): call this from the main thread."""
    with _starting(argv), _started(argv, cwd=cwd, env=dict(env), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, preexec_fn=_die_with_parent(os.getpid())) as process:
        return process


def inheriting(argv: Sequence[str], *, env: Mapping[str, str]) -> subprocess.Popen[bytes]:
    """Start a child that shares this process's output and session (a node's launcher under the
    process that samples its node: what the batch system signals reaches both)."""
    with _starting(argv):
        return subprocess.Popen(resolve_argv(argv), env=dict(env), stdin=subprocess.DEVNULL)


@contextlib.contextmanager
def _started(argv: Sequence[str], **popen: Any) -> Iterator[subprocess.Popen]:
    """The process started in a session of its own, whole: a stop signal that arrives during the start
    is taken once the process is ours (`signals.held`). Whatever ends the block with an exception,
    that signal included, stops the process's group (SIGTERM, SIGKILL 2 s later) before it goes on."""
    process: subprocess.Popen | None = None
    try:
        with signals.held():
            process = subprocess.Popen(resolve_argv(argv), start_new_session=True, **popen)
        yield process
    except BaseException:
        if process is not None:
            stop_group(process, grace_s=2.0)
            for pipe in (process.stdin, process.stdout, process.stderr):
                if pipe is not None:
                    pipe.close()
        raise


@contextlib.contextmanager
def _starting(argv: Sequence[str]):  # noqa: ANN202 - a context manager
    """A program that is not there is one line naming it, not a FileNotFoundError."""
    try:
        yield
    except FileNotFoundError as exc:
        if exc.filename == resolve_argv(argv)[0] or shutil.which(resolve_argv(argv)[0]) is None:
            raise ProgramNotFound(f"program {resolve_argv(argv)[0]!r} not found (install it or put it on"
                                  " PATH)") from None
        raise


def _die_with_parent(parent: int):  # noqa: ANN202 - a preexec function
    """Runs in the child between fork and exec: only an async-signal-safe call and a check."""
    if _LIBC is None:
        return None
    prctl = _LIBC.prctl

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the request was in place
            os._exit(1)

    return preexec


def find_marked(value: str, key: str = MARK_ENV) -> list[int]:
    """PIDs of this host's processes whose environment carries ``key=value`` (not this one).
    Processes of other users, and zombies, cannot be read and are not listed."""
    wanted = f"{key}={value}".encode()
    found = []
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else []:
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if wanted in environ.split(b"\0"):
            found.append(int(entry.name))
    return sorted(found)


def kill_marked(value: str, wait_s: float = 5.0, key: str = MARK_ENV) -> list[int]:
    """SIGKILL every process marked with ``key=value``, again while any is left (a child forked while
    its parent was being killed carries the mark too), for up to ``wait_s``; the PIDs killed."""
    killed: list[int] = []
    deadline = time.monotonic() + wait_s
    while pids := find_marked(value, key):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        killed += [pid for pid in pids if pid not in killed]
        if time.monotonic() >= deadline:
            break
        time.sleep(0.05)
    return killed


def described(pid: int) -> str:
    """'pid 4242 (sleep)': a process as a person reads it ('pid 4242' when its name cannot be read)."""
    try:
        return f"pid {pid} ({Path(f'/proc/{pid}/comm').read_text().strip()})"
    except OSError:
        return f"pid {pid}"


def stop_marked(value: str, key: str = JOB_MARK_ENV) -> list[str]:
    """`kill_marked`, each process killed said as `described` (read before it was killed)."""
    names = {pid: described(pid) for pid in find_marked(value, key)}
    if not names:  # a mark is only inherited: with no marked process left, none can appear
        return []
    return [names.get(pid, f"pid {pid}") for pid in kill_marked(value, key=key)]


def stop_group(proc: subprocess.Popen, grace_s: float = TERM_GRACE_S) -> None:
    """SIGTERM the process group, SIGKILL it after ``grace_s``."""
    if proc.poll() is not None:
        _signal_group(proc.pid, signal.SIGKILL)  # leftovers of an exited leader
        return
    _signal_group(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace_s)
    _signal_group(proc.pid, signal.SIGKILL)
    proc.wait()


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _stderr_fd() -> int:
    """Our stderr's file descriptor (2 where sys.stderr is not a file, as under a test's capture)."""
    try:
        return sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        return 2
