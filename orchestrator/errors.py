"""The exception hierarchy of mltrain; each error carries the process exit code it maps to.

Only the CLI entry point catches broadly: everything else raises one of these with a message
that is a single actionable line.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_INVALID_RESULT = 1  # the benchmark ran, but the result is invalid or a run failed
EXIT_USAGE = 2  # bad usage or bad input: nothing was run, nothing was written
EXIT_COULD_NOT_RUN = 3  # `mltrain qualify`: a check could not run (engine down, image broken): infrastructure
EXIT_INTERRUPTED = 130  # stopped by the user (SIGINT); resumable


class MltrainError(Exception):
    """Base class: a failure the user can act on, shown as one line."""

    exit_code = 1


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


class Interrupted(MltrainError):
    """The user stopped a run (Ctrl-C); what finished is kept and can be resumed."""

    exit_code = EXIT_INTERRUPTED


class RunnerError(MltrainError):
    """A runner could not start or manage a run (engine down, build failed, missing runtime)."""

    exit_code = 1
