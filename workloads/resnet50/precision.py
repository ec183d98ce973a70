"""resnet50's side of ``precision=auto`` and ``threads=auto`` (the workload conventions).

The precision rule is ``workloads.common.precision`` (one table of GPU generations for every
workload: bf16 where native, fp16 + GradScaler on 7.x, fp32 below 7.0 and on a CPU without native
bf16; a forced bf16 on a GPU without native bf16 is refused, SettingsError, not emulated); threads
are ``workloads.common.cpus``'s (the CPUs this process may use divided by the processes per node,
at least 1). ``resolve`` is a pure function of the facts (``workloads.common.devices`` reads them).
"""

from __future__ import annotations

from dataclasses import dataclass

from workloads.common import precision as rule
from workloads.common.cpus import threads_per_process
from workloads.common.errors import SettingsError


@dataclass(frozen=True, kw_only=True)
class Resolved:
    """What ``auto`` became on this device."""

    precision: str
    """'fp32', 'bf16' or 'fp16'."""
    threads: int
    """torch intra-op threads of this process."""
    why: str
    """One sentence: why this precision."""


def resolve(requested: str, device_kind: str, capability: tuple[int, int] | None, cpu_bf16_native: bool,
            cpus: int, nproc: int, *, threads: int = 0) -> Resolved:
    """Precision and threads for ``requested`` ('auto', 'fp32'/'none', 'bf16', 'fp16') on this device;
    ``threads`` 0 means auto. Raises SettingsError for an unknown precision, or bf16 forced on a GPU
    without native bf16."""
    chosen_threads = threads if threads > 0 else threads_per_process(cpus, nproc)
    try:
        choice = rule.choose(requested, device_kind, capability, cpu_bf16_native)
    except rule.PrecisionError as exc:
        raise SettingsError(f"precision={requested}: {exc}") from None
    return Resolved(precision=choice.precision, threads=chosen_threads, why=choice.why)
