"""What the probe runs on: the device its cases use (cuda:0 or the CPU, every GPU for a per-GPU
case), how to wait for their kernels, and the facts of the first protocol line.

The facts name every CUDA device by UUID and PCI bus id (NVML's format), which is how the
orchestrator matches CUDA's numbering to NVML's: CUDA numbers the fastest GPU first unless
``CUDA_DEVICE_ORDER=PCI_BUS_ID``, and ``CUDA_VISIBLE_DEVICES`` renumbers.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import torch

from workloads.common import precision
from workloads.common.devices import cpu_name
from workloads.common.probe.protocol import one_line

DeviceKind = Literal["cuda", "cpu"]


@dataclass(frozen=True, kw_only=True)
class Device:
    """The device of the probe's cases."""

    kind: DeviceKind
    wanted: str = "auto"
    """What the settings asked for: auto (CUDA where torch can use it), cuda or cpu."""
    gpu_count: int = 0
    """CUDA devices torch sees (0 on the CPU)."""

    @property
    def cuda(self) -> bool:
        return self.kind == "cuda"

    @property
    def main(self) -> torch.device:
        """Where a case that is not per-GPU runs: cuda:0, or the CPU."""
        return torch.device("cuda:0" if self.cuda else "cpu")

    def on(self, gpu: int | None) -> torch.device:
        """The device of a case: CUDA device ``gpu`` (None: the main device)."""
        return torch.device(f"cuda:{gpu}") if self.cuda and gpu is not None else self.main

    def sync_on(self, gpu: int | None) -> Callable[[], None]:
        """What waits for a case's kernels on its device (nothing to wait for on the CPU)."""
        if not self.cuda:
            return lambda: None
        return lambda: torch.cuda.synchronize(gpu if gpu is not None else 0)

    def placements(self, per_gpu: bool) -> list[int | None]:
        """Where a case runs: on each GPU of two or more when it is a per-GPU case, else once (None)."""
        return list(range(self.gpu_count)) if per_gpu and self.gpu_count > 1 else [None]

    def free(self) -> None:
        """Give cached device memory back after a failed case, so that the next one has it."""
        if self.cuda:
            torch.cuda.empty_cache()

    def identity(self, gpu: int) -> tuple[str, int]:
        """What makes two GPUs give the same bits for the same problem: their model and SM count."""
        props = torch.cuda.get_device_properties(gpu)
        return props.name, props.multi_processor_count

    def pinned(self, nbytes: int) -> torch.Tensor:
        """A page-locked host buffer of ``nbytes`` (what copies to and from a GPU run at full rate from)."""
        return torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)

    def local_cpus(self, gpu: int | None) -> set[int] | None:
        """The CPUs of the NUMA node the GPU hangs off (sysfs ``local_cpulist`` of its PCI device),
        where host buffers for it belong; None where they cannot be found."""
        if not self.cuda:
            return None
        bus = gpu_facts(gpu or 0).get("pci_bus_id")
        if not isinstance(bus, str):
            return None
        domain, rest = bus.split(":", 1)
        try:  # sysfs names the device 0000:1b:00.0 (a 4-digit domain, lower case); NVML 00000000:1B:00.0
            with open(f"/sys/bus/pci/devices/{int(domain, 16):04x}:{rest.lower()}/local_cpulist") as handle:
                return cpu_list(handle.read())
        except (OSError, ValueError):
            return None


def cpu_list(text: str) -> set[int]:
    """The CPUs of a kernel CPU list (``0-23,48-71``)."""
    found: set[int] = set()
    for part in text.strip().split(","):
        if part:
            low, _, high = part.partition("-")
            found.update(range(int(low), int(high or low) + 1))
    return found


def open_device(wanted: str) -> Device:
    """CUDA when torch can use it and ``wanted`` allows it, else the CPU."""
    if torch.cuda.is_available() and wanted in ("auto", "cuda"):
        return Device(kind="cuda", wanted=wanted, gpu_count=torch.cuda.device_count())
    return Device(kind="cpu", wanted=wanted)


def facts(device: Device, seed: int) -> dict[str, Any]:
    """The device line's fields."""
    found: dict[str, Any] = {
        "device": device.kind,
        "torch": torch.__version__,
        "cuda_runtime": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if device.cuda else None,
        "threads": torch.get_num_threads(),
        "cpus": len(os.sched_getaffinity(0)),
        "cpu_bf16_native": precision.cpu_bf16_native(),
        "gpu_count": device.gpu_count,
        "seed": seed,
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "cuda_device_order": os.environ.get("CUDA_DEVICE_ORDER"),
    }
    if device.cuda:
        props = torch.cuda.get_device_properties(0)
        found.update(device_name=props.name, capability=f"{props.major}.{props.minor}",
                     device_memory_bytes=props.total_memory,
                     gpus=[gpu_facts(i) for i in range(device.gpu_count)])
    else:
        found.update(device_name=cpu_name(), capability=None, cuda_unavailable=cuda_failure(device.wanted))
    return found


def gpu_facts(index: int) -> dict[str, Any]:
    """What names CUDA device ``index`` for NVML: its UUID and PCI bus id (NVML's format)."""
    props = torch.cuda.get_device_properties(index)
    uuid = getattr(props, "uuid", None)
    bus = [getattr(props, f"pci_{part}_id", None) for part in ("domain", "bus", "device")]
    return {"index": index, "name": props.name, "uuid": f"GPU-{uuid}" if uuid is not None else None,
            "pci_bus_id": "{:08X}:{:02X}:{:02X}.0".format(*bus) if None not in bus else None,
            "memory_bytes": props.total_memory, "capability": f"{props.major}.{props.minor}"}


def cuda_failure(wanted: str) -> str:
    """Why the probe runs on the CPU: told so, or what CUDA says when asked to start."""
    if wanted == "cpu":
        return "the probe was told to run on the CPU"
    if torch.version.cuda is None:
        return f"torch {torch.__version__} has no CUDA (Torch not compiled with CUDA enabled)"
    try:
        torch.cuda.init()
    except Exception as exc:  # noqa: BLE001 - CUDA's reason, whatever its type, is the fact reported
        return f"{type(exc).__name__}: {one_line(exc)}"
    return f"torch.cuda.is_available() is False (CUDA sees {torch.cuda.device_count()} devices)"
