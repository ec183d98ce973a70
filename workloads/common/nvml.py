"""The one NVML reader of workloads and benchmarks (nvidia-ml-py, optional): a CUDA device's clocks,
power and temperature now (`gpu_state`), and a sampler of its clocks and power while in a ``with``
block (`GpuSampler`, what `timing.timed_region` enters around a timed region).

A CUDA device is found in NVML by its PCI bus id (CUDA's numbering need not be NVML's), by its index
when the bus id is not found. Without nvidia-ml-py or a driver that answers, the readings are empty
(the sampler says why once on stderr): clocks and power are context, never a result. The
orchestrator's telemetry reads NVML on its own side (``orchestrator.insight``): workloads never
import it.
"""

from __future__ import annotations

import statistics
import sys
import threading
from typing import Any

import torch


def _handle(nvml: Any, device: torch.device) -> Any:
    """NVML's handle of CUDA ``device``: by PCI bus id, else by index."""
    props = torch.cuda.get_device_properties(device)
    bus = f"{props.pci_domain_id:08x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0"
    try:
        return nvml.nvmlDeviceGetHandleByPciBusId(bus)
    except nvml.NVMLError:
        return nvml.nvmlDeviceGetHandleByIndex(device.index or 0)


def _text(value: object) -> object:
    return value.decode() if isinstance(value, bytes) else value


def gpu_state(device: torch.device) -> dict[str, object]:
    """Name, clocks, power and temperature of CUDA ``device`` now (empty without nvidia-ml-py;
    ``{"nvml_error": ...}`` when the driver does not answer)."""
    try:
        import pynvml
    except ImportError:
        return {}
    try:
        pynvml.nvmlInit()
        handle = _handle(pynvml, device)
        state = {
            "name": pynvml.nvmlDeviceGetName(handle),
            "sm_clock_mhz": pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM),
            "sm_clock_max_mhz": pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_SM),
            "mem_clock_mhz": pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_MEM),
            "power_w": pynvml.nvmlDeviceGetPowerUsage(handle) / 1000,
            "power_limit_w": pynvml.nvmlDeviceGetEnforcedPowerLimit(handle) / 1000,
            "temperature_c": pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU),
        }
        pynvml.nvmlShutdown()
    except pynvml.NVMLError as error:
        return {"nvml_error": str(error)}
    return {key: _text(value) for key, value in state.items()}


class GpuSampler:
    """Samples the GPU's SM clock, memory clock and power every ``interval_s`` while in a ``with``
    block (NVML); samples nothing on a CPU or without NVML."""

    def __init__(self, device: torch.device, interval_s: float = 0.1) -> None:
        self.samples: list[tuple[float, float, float]] = []
        self.interval_s = interval_s
        self._nvml: Any = None
        self._handle: Any = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if device.type != "cuda":
            return
        try:
            import pynvml

            pynvml.nvmlInit()
            self._handle = _handle(pynvml, device)
            self._nvml = pynvml
        except Exception as err:  # pynvml raises its own NVMLError types; clocks are optional
            sys.stderr.write(f"no clocks or power: {err}\n")

    def read(self) -> tuple[float, float, float]:
        """(SM clock MHz, memory clock MHz, power W) now."""
        nv = self._nvml
        return (float(nv.nvmlDeviceGetClockInfo(self._handle, nv.NVML_CLOCK_SM)),
                float(nv.nvmlDeviceGetClockInfo(self._handle, nv.NVML_CLOCK_MEM)),
                nv.nvmlDeviceGetPowerUsage(self._handle) / 1000.0)

    def static(self) -> dict[str, object]:
        """The device's maximum clocks, power limit and driver (empty without NVML)."""
        if self._nvml is None:
            return {}
        nv = self._nvml
        return {"max_sm_clock_mhz": nv.nvmlDeviceGetMaxClockInfo(self._handle, nv.NVML_CLOCK_SM),
                "max_mem_clock_mhz": nv.nvmlDeviceGetMaxClockInfo(self._handle, nv.NVML_CLOCK_MEM),
                "power_limit_w": nv.nvmlDeviceGetEnforcedPowerLimit(self._handle) / 1000.0,
                "driver": nv.nvmlSystemGetDriverVersion()}

    def reset(self) -> None:
        self.samples = []

    def __enter__(self) -> GpuSampler:
        if self._nvml is not None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, daemon=True)
            self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.samples.append(self.read())

    def __exit__(self, *exc: object) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()

    def summary(self) -> dict[str, float]:
        """Medians of the samples (and the largest power), empty without samples."""
        if not self.samples:
            return {}
        sm, mem, power = zip(*self.samples, strict=True)
        return {"sm_clock_mhz": statistics.median(sm), "mem_clock_mhz": statistics.median(mem),
                "power_w": statistics.median(power), "power_w_max": max(power)}
