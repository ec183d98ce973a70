"""Errors of the harness, on the kit's base (``workloads.common.errors``): exit 2, one line on stderr."""

from __future__ import annotations

from workloads.common.errors import WorkloadError


class HarnessError(WorkloadError):
    """Bad input: an option, a model file, a dataset folder. Exit 2, one line."""


class BackendError(HarnessError):
    """A backend or execution provider that cannot run here (not installed, no device)."""
