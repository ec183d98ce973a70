"""unet3d's side of ``auto``: precision (by the common rule) and threads, and the autocast they imply.

The precision rule is ``workloads.common.precision`` (one table of GPU generations for every
workload: bf16 where native, fp16 + GradScaler on 7.x, fp32 below and on a CPU without native
bf16; a forced bf16 on a GPU without native bf16 is refused, ``SettingsError``). What stays here:

- ``resolve``, a pure function of what was asked and what the machine is, adding the threads
  (``workloads.common.cpus``: the CPUs this process may use divided by the processes per node);
- the autocast context for the resolved precision.

The probes of the machine are the kit's (``workloads.common.cpus``, ``workloads.common.devices``);
``settings.py`` reads them through this module (``P.usable_cpus()``, ``P.cuda_capability(device)``,
``P.device_name(device)``, ``P.cpu_bf16_native()``), so a test stands in for a machine by patching them here.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch

from workloads.common import precision as rule
from workloads.common.cpus import threads_per_process, usable_cpus
from workloads.common.devices import cuda_capability, device_name
from workloads.common.errors import SettingsError
from workloads.common.precision import PRECISIONS, REQUESTS, cpu_bf16_native, normalise

__all__ = ["PRECISIONS", "REQUESTS", "Resolved", "autocast", "autocast_dtype", "cpu_bf16_native", "cuda_capability",
           "device_name", "normalise", "resolve", "usable_cpus"]


@dataclass(frozen=True)
class Resolved:
    """What ``auto`` became on this machine."""

    precision: str
    """'fp32', 'bf16' or 'fp16' (autocast dtype; fp16 comes with a GradScaler)."""
    threads: int
    """torch intra-op threads per process."""
    why: str
    """One sentence for the log."""


def resolve(
    requested: str,
    device_kind: str,
    capability: tuple[int, int] | None,
    cpu_bf16_native: bool,
    cpus: int,
    nproc: int,
    threads: int | None = None,
) -> Resolved:
    """Precision and threads for ``requested`` ('auto' or a precision) on ``device_kind`` ('cpu' or
    'cuda', with its compute ``capability``), ``cpus`` usable CPUs shared by ``nproc`` processes;
    ``threads`` forces a thread count (None: auto). SettingsError for a precision that is none, or
    that the device lacks."""
    count = threads if threads is not None else threads_per_process(cpus, nproc)
    try:
        choice = rule.choose(requested, device_kind, capability, cpu_bf16_native)
    except rule.PrecisionError as exc:
        raise SettingsError(f"AMP={requested}: {exc}") from None
    return Resolved(choice.precision, count, choice.why)


def autocast_dtype(precision: str) -> torch.dtype | None:
    return {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[precision]


def autocast(precision: str, device: torch.device) -> contextlib.AbstractContextManager:
    """torch.autocast for ``precision`` on ``device`` (nothing for fp32)."""
    dtype = autocast_dtype(precision)
    if dtype is None or device.type not in ("cpu", "cuda"):
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype)
