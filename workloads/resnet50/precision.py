"""resnet50's side of ``precision=auto`` and ``threads=auto`` (the workload conventions).

The precision rule is ``workloads.common.precision`` (one table of GPU generations for every
workload: bf16 where native, fp16 + GradScaler on 7.x, fp32 below 7.0 and on a CPU without native
bf16; a forced bf16 on a GPU without native bf16 is refused, SettingsError, not emulated). Here:

- threads: the CPUs this process may use (its affinity, capped by a cgroup v2 ``cpu.max`` quota)
  divided by the processes per node, at least 1;
- ``resolve``, a pure function of the facts, and ``device_facts`` / ``available_cpus`` that read them.
"""

from __future__ import annotations

import math
import os
import platform
from dataclasses import dataclass
from pathlib import Path

import torch

from workloads.common import precision as rule
from workloads.resnet50.errors import SettingsError

CGROUP_CPU_MAX = Path("/sys/fs/cgroup/cpu.max")


@dataclass(frozen=True, kw_only=True)
class Resolved:
    """What ``auto`` became on this device."""

    precision: str
    """'fp32', 'bf16' or 'fp16'."""
    threads: int
    """torch intra-op threads of this process."""
    why: str
    """One sentence: why this precision."""


@dataclass(frozen=True, kw_only=True)
class DeviceFacts:
    """What resolution needs to know about the device."""

    kind: str
    """'cpu' or 'cuda'."""
    name: str
    """GPU or CPU model name."""
    capability: tuple[int, int] | None
    """CUDA compute capability (None on CPU)."""
    cpu_bf16_native: bool
    """Whether the CPU runs bf16 natively (AVX512-BF16 or AMX: the common rule's probe)."""
    total_memory: int | None = None
    """The GPU's memory in bytes (None on CPU)."""


def resolve(requested: str, device_kind: str, capability: tuple[int, int] | None, cpu_bf16_native: bool,
            cpus: int, nproc: int, *, threads: int = 0) -> Resolved:
    """Precision and threads for ``requested`` ('auto', 'fp32'/'none', 'bf16', 'fp16') on this device;
    ``threads`` 0 means auto. Raises SettingsError for an unknown precision, or bf16 forced on a GPU
    without native bf16."""
    chosen_threads = threads if threads > 0 else max(1, cpus // max(1, nproc))
    try:
        choice = rule.choose(requested, device_kind, capability, cpu_bf16_native)
    except rule.PrecisionError as exc:
        raise SettingsError(f"precision={requested}: {exc}") from None
    return Resolved(precision=choice.precision, threads=chosen_threads, why=choice.why)


def cgroup_cpu_quota(text: str) -> float | None:
    """CPUs allowed by a cgroup v2 ``cpu.max`` line ('QUOTA PERIOD' or 'max PERIOD'); None: no quota."""
    parts = text.split()
    if len(parts) != 2 or parts[0] == "max":
        return None
    try:
        quota, period = int(parts[0]), int(parts[1])
    except ValueError:
        return None
    return quota / period if quota > 0 and period > 0 else None


def available_cpus(cpu_max: Path = CGROUP_CPU_MAX) -> int:
    """CPUs this process may run on: its affinity mask, capped by a cgroup v2 quota when one is set."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    try:
        quota = cgroup_cpu_quota(cpu_max.read_text())
    except OSError:
        quota = None
    if quota is not None:
        cpus = min(cpus, max(1, math.floor(quota)))
    return max(1, cpus)


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


def cpu_bf16_native() -> bool:
    """Whether this CPU runs bf16 natively (AVX-512 BF16 or AMX), not emulated: the common rule's probe."""
    return rule.cpu_bf16_native()


def device_facts(device: torch.device) -> DeviceFacts:
    if device.type == "cuda":
        return DeviceFacts(kind="cuda", name=torch.cuda.get_device_name(device),
                           capability=tuple(torch.cuda.get_device_capability(device)), cpu_bf16_native=False,
                           total_memory=int(torch.cuda.get_device_properties(device).total_memory))
    return DeviceFacts(kind=device.type, name=cpu_name(), capability=None, cpu_bf16_native=cpu_bf16_native())


def pick_device(requested: str) -> str:
    """'cuda' or 'cpu' for the config's ``device`` ('auto' takes CUDA when there is one)."""
    if requested == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if requested == "cuda" and not torch.cuda.is_available():
        raise SettingsError("device=cuda but torch sees no CUDA device (use device=auto or cpu)")
    return requested
