"""The resnet50 workload's exceptions; each carries the exit code its command line returns.

Every command line of the workload (``train``, ``throughput``, ``dataset``) turns a ``WorkloadError``
into its message as one line on stderr and ``exit_code``; anything else is a crash (exit 1).
"""

from __future__ import annotations

EXIT_BAD_INPUT = 2
"""Exit code of bad input or data: arguments, settings, dataset layout, unreadable files."""


class WorkloadError(Exception):
    """Bad input or data; the message is the one actionable line shown to the user."""

    exit_code = EXIT_BAD_INPUT


class LayoutError(WorkloadError):
    """A dataset folder that is not in the ImageNet layout."""


class DatasetError(WorkloadError):
    """A dataset that the dataset command line rejects (counts, unreadable images, bad arguments)."""


class SettingsError(WorkloadError):
    """A setting that cannot run here: an unknown field, a bad value, a precision the device lacks."""
