"""unet3d's former name for the kit's ``DataError`` (``workloads.common.errors``), kept only while
``data_loader.py`` imports it from here; the workload's other modules import the kit."""

from __future__ import annotations

from workloads.common.errors import DataError

__all__ = ["DataError"]
