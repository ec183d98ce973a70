"""Hardware-aware resolution of ``precision=auto`` and ``threads=auto`` (the workload conventions).

- CUDA: compute capability >= 8.0 (Ampere, Ada, Hopper, ...) -> bf16 autocast; 7.x (V100, T4) ->
  fp16 autocast with a GradScaler; fp32 when asked. A forced bf16 on a GPU without native bf16 is
  refused (SettingsError), not silently emulated.
- CPU: bf16 only where oneDNN runs it natively, else fp32 (emulated bf16 is several times slower).
- threads: the CPUs this process may use (its affinity, capped by a cgroup v2 ``cpu.max`` quota)
  divided by the processes per node, at least 1.

``resolve`` is a pure function of the facts; ``device_facts`` and ``available_cpus`` read them.
"""

from __future__ import annotations

import math
import os
import platform
from dataclasses import dataclass
from pathlib import Path

import torch

from workloads.resnet50.errors import SettingsError

ALIASES = {"none": "fp32"}
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
    """Whether the CPU runs bf16 natively (AVX512-BF16 or AMX, as oneDNN reports)."""


def resolve(requested: str, device_kind: str, capability: tuple[int, int] | None, cpu_bf16_native: bool,
            cpus: int, nproc: int, *, threads: int = 0) -> Resolved:
    """Precision and threads for ``requested`` ('auto', 'fp32'/'none', 'bf16', 'fp16') on this device;
    ``threads`` 0 means auto. Raises SettingsError for bf16 forced on a GPU without native bf16."""
    wanted = ALIASES.get(requested, requested)
    if wanted not in ("auto", "fp32", "bf16", "fp16"):
        raise SettingsError(f"invalid precision {requested!r} (auto, fp32, bf16 or fp16)")
    chosen_threads = threads if threads > 0 else max(1, cpus // max(1, nproc))
    if device_kind == "cuda":
        if capability is None:
            raise ValueError("a CUDA device needs its compute capability")
        cc = f"{capability[0]}.{capability[1]}"
        native_bf16 = capability >= (8, 0)
        if wanted == "bf16" and not native_bf16:
            raise SettingsError(f"precision bf16 needs a GPU with native bf16 (compute capability 8.0 or newer); "
                                f"this one is {cc}: use precision=fp16 or fp32")
        if wanted == "auto":
            if native_bf16:
                return Resolved(precision="bf16", threads=chosen_threads,
                                why=f"auto on compute capability {cc}: bf16 autocast, native from Ampere (8.0) on")
            return Resolved(precision="fp16", threads=chosen_threads,
                            why=f"auto on compute capability {cc}: no native bf16 before 8.0, so fp16 autocast "
                                f"with a GradScaler")
        return Resolved(precision=wanted, threads=chosen_threads, why=f"{wanted} asked for (compute capability {cc})")
    if wanted == "auto":
        if cpu_bf16_native:
            return Resolved(precision="bf16", threads=chosen_threads,
                            why="auto on a CPU with native bf16: bf16 autocast")
        return Resolved(precision="fp32", threads=chosen_threads,
                        why="auto on a CPU without native bf16 (emulated bf16 is slower than fp32): fp32")
    note = " (emulated on this CPU: slower than fp32)" if wanted == "bf16" and not cpu_bf16_native else ""
    return Resolved(precision=wanted, threads=chosen_threads, why=f"{wanted} asked for{note}")


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
    """Whether oneDNN runs bf16 natively on this CPU (False where the query does not exist)."""
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def device_facts(device: torch.device) -> DeviceFacts:
    if device.type == "cuda":
        return DeviceFacts(kind="cuda", name=torch.cuda.get_device_name(device),
                           capability=tuple(torch.cuda.get_device_capability(device)), cpu_bf16_native=False)
    return DeviceFacts(kind=device.type, name=cpu_name(), capability=None, cpu_bf16_native=cpu_bf16_native())


def pick_device(requested: str) -> str:
    """'cuda' or 'cpu' for the config's ``device`` ('auto' takes CUDA when there is one)."""
    if requested == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if requested == "cuda" and not torch.cuda.is_available():
        raise SettingsError("device=cuda but torch sees no CUDA device (use device=auto or cpu)")
    return requested
