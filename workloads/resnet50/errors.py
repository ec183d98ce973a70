"""The resnet50 workload's own errors, on the kit's (``workloads.common.errors``): both are bad data
(exit 2, one line). Settings errors are the kit's ``SettingsError``."""

from __future__ import annotations

from workloads.common.errors import DataError


class LayoutError(DataError):
    """A dataset folder that is not in the ImageNet layout."""


class DatasetError(DataError):
    """A dataset that the dataset command line rejects (counts, unreadable images, bad arguments)."""
