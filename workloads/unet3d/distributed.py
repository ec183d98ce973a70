"""unet3d's former name for the kit's ``Context`` (``workloads.common.distributed``), kept only while
``benchmarks/unet3d_gpu_throughput.py`` imports it from here; the workload itself imports the kit."""

from __future__ import annotations

from workloads.common.distributed import Context

__all__ = ["Context"]
