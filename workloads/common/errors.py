"""The errors a workload's command lines know: each carries the exit code its command returns.

A command line (``train``, ``throughput``, ``dataset``, the inference harness) runs through
``workloads.common.cli.run_main``, which turns a ``WorkloadError`` into its message as one line on
stderr and ``exit_code`` (the contract: 2 bad input or data, 1 another failure). Anything else is a
crash: Python's traceback and exit 1 (the orchestrator classifies it from the output, out of memory
included).
"""

from __future__ import annotations

EXIT_FAILURE = 1
"""A failure that is not the input's fault."""
EXIT_BAD_INPUT = 2
"""Bad input or data: arguments, settings, a dataset folder, an unreadable file."""
EXIT_INTERRUPTED = 130
"""Stopped by Ctrl-C (128 + SIGINT)."""


class WorkloadError(Exception):
    """Bad input or data; the message is the one actionable line shown to the user."""

    exit_code = EXIT_BAD_INPUT


class DataError(WorkloadError):
    """Missing, malformed or inconsistent dataset input; the message names the case or file."""


class SettingsError(WorkloadError):
    """A setting that cannot run here: an unknown field, a bad value, a precision the device lacks."""


class Failure(WorkloadError):
    """A failure that one line explains (a worker process died): exit 1, no traceback."""

    exit_code = EXIT_FAILURE
