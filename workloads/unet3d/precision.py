"""unet3d's side of ``auto``: precision (by the common rule), threads, processes, and the autocast they imply.

The precision rule is ``workloads.common.precision`` (one table of GPU generations for every
workload: bf16 where native, fp16 + GradScaler on 7.x, fp32 below and on a CPU without native
bf16; a forced bf16 on a GPU without native bf16 is refused, ``SettingsError``). What stays here:

- ``resolve``, a pure function of what was asked and what the machine is, adding the threads:
  the CPUs this process may use divided by the processes per node;
- the autocast context for the resolved precision;
- the probes (``usable_cpus``, ``cpu_bf16_native``, ``cuda_capability``, ``visible_cuda_devices``)
  that read the machine; ``python -m workloads.unet3d.precision nproc`` prints NPROC's ``auto``
  value for run_and_time.sh.
"""

from __future__ import annotations

import contextlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import torch

from workloads.common import precision as rule
from workloads.unet3d.errors import SettingsError

PRECISIONS = rule.PRECISIONS
REQUESTS = rule.REQUESTS
CGROUP_CPU_MAX = Path("/sys/fs/cgroup/cpu.max")


@dataclass(frozen=True)
class Resolved:
    """What ``auto`` became on this machine."""

    precision: str
    """'fp32', 'bf16' or 'fp16' (autocast dtype; fp16 comes with a GradScaler)."""
    threads: int
    """torch intra-op threads per process."""
    why: str
    """One sentence for the log."""


def normalise(requested: str) -> str:
    """'auto', 'fp32', 'bf16' or 'fp16' (``none`` is fp32); ValueError on anything else."""
    return rule.normalise(requested)


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
    ``threads`` forces a thread count (None: auto)."""
    count = threads if threads is not None else max(1, cpus // max(1, nproc))
    try:
        choice = rule.choose(requested, device_kind, capability, cpu_bf16_native)
    except rule.UnsupportedPrecision as exc:
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


# ---- probes of this machine -------------------------------------------------------------------


def cgroup_cpu_limit(text: str) -> float | None:
    """CPUs a cgroup v2 ``cpu.max`` line allows ("max 100000": no limit; "150000 100000": 1.5)."""
    parts = text.split()
    if len(parts) != 2 or parts[0] == "max":
        return None
    try:
        quota, period = int(parts[0]), int(parts[1])
    except ValueError:
        return None
    return quota / period if quota > 0 and period > 0 else None


def usable_cpus(cpu_max: Path = CGROUP_CPU_MAX) -> int:
    """CPUs this process may run on (affinity), capped by a cgroup v2 quota when one is set."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cpus = os.cpu_count() or 1
    try:
        limit = cgroup_cpu_limit(cpu_max.read_text())
    except OSError:
        limit = None
    if limit is not None:
        cpus = min(cpus, max(1, int(limit)))
    return max(1, cpus)


def cpu_bf16_native() -> bool:
    """Whether this CPU runs bf16 natively (AVX-512 BF16 or AMX), not emulated: the common rule's probe."""
    return rule.cpu_bf16_native()


def cuda_capability(device: torch.device) -> tuple[int, int] | None:
    if device.type != "cuda":
        return None
    major, minor = torch.cuda.get_device_capability(device)
    return int(major), int(minor)


def device_name(device: torch.device) -> str:
    """The GPU's name, or the CPU's model name (``/proc/cpuinfo``), or 'cpu'."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return device.type


def visible_cuda_devices() -> int:
    """CUDA devices this process sees (CUDA_VISIBLE_DEVICES respected); 0 without CUDA."""
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def auto_nproc() -> int:
    """NPROC=auto: one process per visible GPU, 1 on a CPU."""
    return max(1, visible_cuda_devices())


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args != ["nproc"]:
        sys.stderr.write("usage: python -m workloads.unet3d.precision nproc\n")
        return 2
    sys.stdout.write(f"{auto_nproc()}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
