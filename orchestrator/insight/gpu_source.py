"""Where a seed's GPU samples come from: NVML live (`NvmlGpuSource`, the run's GPUs only), or
nothing, with the reason (`NoGpuSource`). A recorded trace replays through `gpu_trace.TraceGpuSource`.

Only the GPUs the run was given are read (the runner's `sampled_gpus`: ``--gpus`` device ids, the
first N for a count, or ``CUDA_VISIBLE_DEVICES``), so that energy and utilisation are the run's, not
the host's. An index is CUDA's for the local and Slurm runners: mltrain starts every job with
``CUDA_DEVICE_ORDER=PCI_BUS_ID`` (CUDA's default numbers the fastest GPU first, which on a node of
mixed models is not NVML's order), so the run's GPU k is found as the k-th in PCI bus order, never
by NVML's index, which NVML does not promise to be that order. Docker's device ids are NVML's
indices (the runner's `gpu_numbering`). UUIDs (``GPU-...``) name a device exactly. A GPU that cannot
be read (lost, outside the job's cgroup) is named with its reason, not sampled.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from orchestrator.insight import gpus
from orchestrator.insight.throttle import clocks_event_reasons_call
from orchestrator.insight.unavailable import unavailable
from orchestrator.results.series import GPU_COLUMNS

GPU_FIELDS = GPU_COLUMNS
"""The `GpuSample` fields a series stores, one column per GPU each."""


@dataclass(frozen=True, kw_only=True)
class GpuSample:
    """One GPU at one instant; None where the driver could not say."""

    util_pct: float | None
    """GPU utilisation over the driver's last sample period, percent."""
    memory_used_bytes: int | None
    """Device memory in use."""
    power_w: float | None
    """Board power draw."""
    temperature_c: float | None
    """GPU core temperature."""
    sm_clock_mhz: float | None
    """Current SM clock."""
    throttle_bits: int | None
    """NVML clocks-event reason bitmask (see `throttle_reasons`)."""
    energy_mj: float | None = None
    """Total energy counter since the driver loaded (Volta and newer), millijoules."""
    compute_pids: tuple[int, ...] | None = None
    """The processes running CUDA work on it (NVML's compute processes, host PIDs); None when the
    driver could not say. The sampler counts those that are not the seed's."""

    def __post_init__(self) -> None:
        if self.util_pct is not None and not 0 <= self.util_pct <= 100:
            raise ValueError(f"util_pct {self.util_pct} outside 0..100")
        if self.power_w is not None and self.power_w < 0:
            raise ValueError(f"power_w {self.power_w} is negative")


class GpuSource(ABC):
    """Where GPU samples come from. `sample` returns one entry per GPU, in index order."""

    @abstractmethod
    def describe(self) -> dict[str, Any]:
        """``{"available": true, "devices": [names]}`` or ``{"available": false, "reason": ...}``."""

    @abstractmethod
    def sample(self) -> list[GpuSample]:
        """Read every GPU now."""

    def close(self) -> None:  # noqa: B027 - sources without resources need nothing
        """Release the driver."""


class NoGpuSource(GpuSource):
    """No GPU can be read; says why."""

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def describe(self) -> dict[str, Any]:
        return unavailable(self.reason)

    def sample(self) -> list[GpuSample]:
        return []


class NvmlGpuSource(GpuSource):
    """Live GPUs through NVML (``pynvml`` from nvidia-ml-py, or any module with its API): the
    ``devices`` given, or every GPU when None.

    A device is a UUID (``GPU-...``: that GPU) or an index. An index is CUDA's when ``numbering`` is
    "cuda" (``CUDA_VISIBLE_DEVICES``: the k-th GPU in PCI bus order, as mltrain makes CUDA number
    them with ``CUDA_DEVICE_ORDER=PCI_BUS_ID``), so it is found by PCI bus id; NVML's own index when
    "nvml" (the NVIDIA container toolkit's device ids, as Docker hands them out)."""

    def __init__(self, nvml: ModuleType, devices: tuple[str, ...] | None = None, numbering: str = "cuda") -> None:
        self.nvml = nvml
        nvml.nvmlInit()
        self.selected = devices
        count = nvml.nvmlDeviceGetCount()
        by_slot = _pci_order(nvml, count) if numbering == "cuda" and devices is not None else list(range(count))
        wanted = devices if devices is not None else [str(i) for i in range(count)]
        self.handles: list[Any] = []
        self.bus_ids: list[Any] = []
        self.unknown: list[str] = []
        self.unreadable: dict[str, str] = {}
        for device in wanted:
            handle, why = self._open(device, by_slot)
            if handle is None:
                if why:
                    self.unreadable[device] = why
                else:
                    self.unknown.append(device)
                continue
            self.handles.append(handle)
            self.bus_ids.append(gpus.pci_bus_id(nvml, handle))
        self.names = [self._read(lambda h=h: nvml.nvmlDeviceGetName(h)) for h in self.handles]
        self.numbering = numbering
        self.clocks_event_reasons = clocks_event_reasons_call(nvml)

    def _open(self, device: str, by_slot: list[int]) -> tuple[Any, str]:
        """(handle, "") of one of the run's devices; (None, why) for one that cannot be read, (None, "")
        for one this host does not have."""
        nvml = self.nvml
        if device.isdigit():
            return gpus.open_device(nvml, by_slot[int(device)]) if int(device) < len(by_slot) else (None, "")
        try:
            handle = nvml.nvmlDeviceGetHandleByUUID(device)
        except nvml.NVMLError as exc:
            return None, gpus.device_gone(exc) or ""
        why = gpus.lost(nvml, handle)
        return (None, why) if why else (handle, "")

    def describe(self) -> dict[str, Any]:
        names = [n.decode() if isinstance(n, bytes) else n for n in self.names]
        described: dict[str, Any] = {"available": True, "devices": names, "pci_bus_ids": self.bus_ids}
        if self.selected is not None:
            described["selected"] = list(self.selected)
            described["numbering"] = (f"{self.numbering}: " + (
                "CUDA's indices, found by PCI bus id (CUDA_DEVICE_ORDER=PCI_BUS_ID)" if self.numbering == "cuda"
                else "NVML's indices"))
        if self.unknown:
            described["not_found"] = self.unknown
        if self.unreadable:
            described["unavailable"] = self.unreadable
        return described

    def sample(self) -> list[GpuSample]:
        nvml = self.nvml
        samples = []
        for handle in self.handles:
            power_mw = self._read(lambda h=handle: nvml.nvmlDeviceGetPowerUsage(h))
            samples.append(GpuSample(
                util_pct=self._read(lambda h=handle: nvml.nvmlDeviceGetUtilizationRates(h).gpu),
                memory_used_bytes=self._read(lambda h=handle: nvml.nvmlDeviceGetMemoryInfo(h).used),
                power_w=power_mw / 1000 if power_mw is not None else None,
                temperature_c=self._read(lambda h=handle: nvml.nvmlDeviceGetTemperature(h, nvml.NVML_TEMPERATURE_GPU)),
                sm_clock_mhz=self._read(lambda h=handle: nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_SM)),
                throttle_bits=self._read(lambda h=handle: self.clocks_event_reasons(h)),
                energy_mj=self._read(lambda h=handle: nvml.nvmlDeviceGetTotalEnergyConsumption(h)),
                compute_pids=self._read(lambda h=handle: tuple(
                    int(p.pid) for p in nvml.nvmlDeviceGetComputeRunningProcesses(h))),
            ))
        return samples

    def close(self) -> None:
        with contextlib.suppress(self.nvml.NVMLError):
            self.nvml.nvmlShutdown()

    def _read(self, call: Any) -> Any:
        try:
            return call()
        except self.nvml.NVMLError:
            return None


def _pci_order(nvml: ModuleType, count: int) -> list[int]:
    """NVML's indices in PCI bus order, the order CUDA numbers GPUs in under CUDA_DEVICE_ORDER=PCI_BUS_ID
    (a GPU whose bus id cannot be read keeps its NVML place after the others)."""
    slots: list[tuple[str, int]] = []
    for index in range(count):
        bus: Any = None
        with contextlib.suppress(nvml.NVMLError):
            bus = gpus.pci_bus_id(nvml, nvml.nvmlDeviceGetHandleByIndex(index))
        slots.append((bus.upper() if isinstance(bus, str) else "~", index))
    return [index for _, index in sorted(slots)]


def open_gpu_source(
    nvml: ModuleType | None = None, devices: tuple[str, ...] | None = None, numbering: str = "cuda",
) -> GpuSource:
    """NVML for ``devices`` (None: every GPU; indices numbered as ``numbering`` says, see
    `NvmlGpuSource`) when it answers, otherwise a source that says why there are no GPUs."""
    if devices == ():
        return NoGpuSource("the run was given no GPU of this host")
    try:
        nvml = nvml or gpus.load_nvml()
    except ImportError:
        return NoGpuSource("nvidia-ml-py (pynvml) is not installed")
    try:
        return NvmlGpuSource(nvml, devices, numbering)
    except nvml.NVMLError as exc:
        return NoGpuSource(gpus.nvml_failure(exc))


