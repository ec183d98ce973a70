"""Errors of the harness, each with its exit code: 2 bad input (one line on stderr), 1 a failure."""

from __future__ import annotations


class HarnessError(Exception):
    """Bad input: an option, a model file, a dataset folder. Exit 2, one line."""

    exit_code = 2


class BackendError(HarnessError):
    """A backend or execution provider that cannot run here (not installed, no device)."""
