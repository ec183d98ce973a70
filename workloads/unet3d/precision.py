"""Hardware-aware resolution of precision, threads and processes (``auto``), and the autocast they imply.

``resolve`` is a pure function of what was asked and what the machine is:

- CPU: bf16 only where oneDNN runs it natively, else fp32 (an emulated bf16 is several times
  slower than fp32); threads = the CPUs this process may use divided by the processes per node.
- CUDA: compute capability >= 8.0 (Ampere, Ada, Hopper...) -> bf16 autocast; 7.x (V100, T4) ->
  fp16 autocast with a GradScaler; older -> fp32. A forced bf16 on a GPU without native bf16 is
  refused (``SettingsError``) rather than silently emulated.

The probes (``usable_cpus``, ``cpu_bf16_native``, ``cuda_capability``, ``visible_cuda_devices``)
read the machine; ``python -m workloads.unet3d.precision nproc`` prints NPROC's ``auto`` value
for run_and_time.sh.
"""

from __future__ import annotations

import contextlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import torch

from workloads.unet3d.errors import SettingsError

PRECISIONS = ("fp32", "bf16", "fp16")
REQUESTS = ("auto", *PRECISIONS)
ALIASES = {"none": "fp32", "fp32": "fp32", "bf16": "bf16", "fp16": "fp16", "auto": "auto"}
NATIVE_BF16_CAPABILITY = (8, 0)
TENSOR_CORE_CAPABILITY = (7, 0)
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
    try:
        return ALIASES[requested.strip().lower()]
    except KeyError:
        raise ValueError(f"precision must be one of auto, fp32 (none), bf16, fp16; got {requested!r}") from None


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
    wanted = normalise(requested)
    count = threads if threads is not None else max(1, cpus // max(1, nproc))
    if device_kind == "cuda":
        if capability is None:
            raise ValueError("a CUDA device needs its compute capability")
        name = f"compute capability {capability[0]}.{capability[1]}"
        native = capability >= NATIVE_BF16_CAPABILITY
        if wanted == "bf16" and not native:
            raise SettingsError(f"AMP=bf16: this GPU ({name}) has no native bf16; use AMP=fp16, fp32 or auto")
        if wanted != "auto":
            return Resolved(wanted, count, f"{wanted} as asked on a GPU of {name}")
        if native:
            return Resolved("bf16", count, f"bf16 autocast: native on a GPU of {name} (>= 8.0)")
        if capability >= TENSOR_CORE_CAPABILITY:
            return Resolved("fp16", count, f"fp16 autocast with a GradScaler: {name} has fp16 tensor cores "
                                           "but no native bf16")
        return Resolved("fp32", count, f"fp32: a GPU of {name} has no tensor cores")
    if wanted != "auto":
        return Resolved(wanted, count, f"{wanted} as asked on the CPU")
    if cpu_bf16_native:
        return Resolved("bf16", count, "bf16 autocast: this CPU runs bf16 natively (oneDNN)")
    return Resolved("fp32", count, "fp32: this CPU has no native bf16 (emulated bf16 is several times slower)")


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
    """Whether oneDNN runs bf16 natively here (AVX-512 BF16 or AMX), not emulated."""
    try:
        return bool(torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


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
