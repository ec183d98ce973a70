"""The exception hierarchy of mltrain; each error carries the process exit code it maps to.

Only the CLI entry point catches broadly: everything else raises one of these with a message
that is a single actionable line.
"""

from __future__ import annotations

import signal

EXIT_OK = 0
EXIT_INVALID_RESULT = 1  # the benchmark ran, but the result is invalid
EXIT_USAGE = 2  # bad usage or bad input: nothing was run, nothing was written
EXIT_INFRASTRUCTURE = 3  # an infrastructure fault (crash, kill, OOM, engine, disk) kept a result from being measured
EXIT_WARN = 4  # it ran and passed with a warning (qualify: a WARN verdict, unless warn_exit_code says 0)
EXIT_INTERRUPTED = 128 + signal.SIGINT  # 130: stopped by Ctrl-C; resumable
EXIT_TERMINATED = 128 + signal.SIGTERM  # 143: stopped by SIGTERM (a scheduler, systemd, kill); resumable
EXIT_HANGUP = 128 + signal.SIGHUP  # 129: the terminal went away; resumable


class MltrainError(Exception):
    """Base class: a failure the user can act on, shown as one line."""

    exit_code = 1
    details = ""
    """What may follow that line: how to put it right, when one line cannot say it (how to get a
    dataset). Empty for most errors."""

    def __init__(self, *args: object, details: str = "") -> None:
        super().__init__(*args)
        if details:
            self.details = details


class UsageError(MltrainError):
    """Bad command-line input (unknown workload, bad seed spec, conflicting options)."""

    exit_code = EXIT_USAGE


class ConfigError(MltrainError):
    """An invalid configuration file (seeds.yaml, workload.yaml); the message names the field."""

    exit_code = EXIT_USAGE


class DataError(MltrainError):
    """A dataset that is missing or not training-ready."""

    exit_code = EXIT_USAGE


class LogError(MltrainError):
    """An MLLOG log that cannot be scored (no run_start, run_stop before run_start, ...)."""

    exit_code = EXIT_USAGE


class StoreError(MltrainError):
    """The results folder or its index cannot be read or written."""

    exit_code = EXIT_USAGE


class RecordError(StoreError):
    """A stored file (manifest, summary, seed state, run record) that is damaged or foreign; the
    message names the file and the field."""


class RunBusy(UsageError):
    """The run is held by another live mltrain process (its lock names the holder)."""


class Interrupted(MltrainError):
    """A signal (SIGINT, SIGTERM, SIGHUP) stopped a run; what finished is kept and can be resumed."""

    def __init__(self, message: str, signum: int = signal.SIGINT) -> None:
        super().__init__(message)
        self.signum = signum
        self.exit_code = 128 + signum


class InfrastructureError(MltrainError):
    """The machine, not the input, failed: an engine or controller down, a disk full, a build that broke."""

    exit_code = EXIT_INFRASTRUCTURE


class RunnerError(InfrastructureError):
    """A runner could not start or manage a run (engine down, build failed, missing runtime)."""


class StoreWriteError(InfrastructureError):
    """A file of the results folder could not be written (disk full, quota, read-only file system)."""
