"""Facts about the device a workload runs on, read from the machine: names, compute capability,
how many processes ``NPROC=auto`` starts.

    python -m workloads.common.devices nproc    # NPROC=auto: the visible CUDA devices, or 1

(``nproc.sh`` asks this only where a GPU may be; it honours CUDA_VISIBLE_DEVICES and creates no
CUDA context.)
"""

from __future__ import annotations

import platform
import sys
from dataclasses import dataclass
from pathlib import Path

import torch

from workloads.common import precision
from workloads.common.errors import SettingsError

CPUINFO = Path("/proc/cpuinfo")


@dataclass(frozen=True, kw_only=True)
class DeviceFacts:
    """What resolving ``auto`` needs to know about a device."""

    kind: str
    """'cpu' or 'cuda'."""
    name: str
    """GPU or CPU model name."""
    capability: tuple[int, int] | None
    """CUDA compute capability (None on a CPU)."""
    cpu_bf16_native: bool
    """Whether the CPU runs bf16 natively (AVX-512 BF16 or AMX: the precision rule's probe); False on a GPU."""
    total_memory: int | None = None
    """The GPU's memory in bytes (None on a CPU)."""

    @property
    def capability_text(self) -> str | None:
        """'9.0' (what ``resolved_settings`` logs), None on a CPU."""
        return None if self.capability is None else precision.capability_text(self.capability)


def cpu_name(cpuinfo: Path = CPUINFO) -> str:
    """The CPU's model name (``/proc/cpuinfo``), else the platform's processor or machine name
    (Arm's cpuinfo has no model name: 'aarch64'), else 'cpu'."""
    try:
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


def cuda_capability(device: torch.device) -> tuple[int, int] | None:
    """The CUDA compute capability of ``device``; None for a CPU."""
    if device.type != "cuda":
        return None
    major, minor = torch.cuda.get_device_capability(device)
    return int(major), int(minor)


def device_name(device: torch.device) -> str:
    """The GPU's name, or the CPU's (``cpu_name``)."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return cpu_name()


def device_facts(device: torch.device) -> DeviceFacts:
    """Everything ``DeviceFacts`` holds, read for ``device``."""
    if device.type == "cuda":
        return DeviceFacts(kind="cuda", name=device_name(device), capability=cuda_capability(device),
                           cpu_bf16_native=False,
                           total_memory=int(torch.cuda.get_device_properties(device).total_memory))
    return DeviceFacts(kind=device.type, name=device_name(device), capability=None,
                       cpu_bf16_native=precision.cpu_bf16_native())


def pick_device(requested: str) -> str:
    """'cuda' or 'cpu' for a requested device ('auto', 'cpu' or 'cuda'; 'auto' takes CUDA when torch
    sees one); SettingsError for CUDA asked where there is none."""
    if requested == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if requested == "cuda" and not torch.cuda.is_available():
        raise SettingsError("device=cuda but torch sees no CUDA device (use device=auto or cpu)")
    return requested


def visible_cuda_devices() -> int:
    """CUDA devices this process sees (CUDA_VISIBLE_DEVICES respected); 0 without CUDA."""
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def auto_nproc() -> int:
    """NPROC=auto: one process per visible GPU, 1 on a CPU."""
    return max(1, visible_cuda_devices())


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args != ["nproc"]:
        sys.stderr.write("usage: python -m workloads.common.devices nproc\n")
        return 2
    sys.stdout.write(f"{auto_nproc()}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
