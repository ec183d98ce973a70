"""The GPUs of this host as NVML reports them: driver, CUDA version, and each device's static
facts (name, PCI bus id, memory, clocks, PCIe link, NVLink, ECC, MIG). The one place that loads
NVML, opens a device, and turns its errors into reasons a person can act on; telemetry and
qualification use it too.

A GPU NVML counts may still be unreadable: `nvmlDeviceGetHandleByIndex` raises for a GPU outside
a Slurm job's device cgroup (NoPermission) or one the driver lost, and every query raises on a GPU
that fell off the bus after its handle was taken (GpuIsLost, Xid 79). `open_device` says which,
so that such a GPU is one entry with its reason, never a traceback."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from types import ModuleType
from typing import Any

from orchestrator.insight.unavailable import unavailable


def load_nvml() -> ModuleType:
    import pynvml  # nvidia-ml-py

    return pynvml


def nvml_failure(exc: Exception) -> str:
    """A reason a person can act on, for an NVML exception."""
    name = type(exc).__name__
    if "LibraryNotFound" in name:
        return "NVIDIA driver not loaded (libnvidia-ml.so not found)"
    if "DriverNotLoaded" in name:
        return "NVIDIA driver not loaded"
    if "NoPermission" in name:
        return "no permission to query the NVIDIA driver"
    if "NotSupported" in name:
        return "not supported by this GPU or driver"
    return f"NVML error: {exc}"


GONE = {
    "GpuIsLost": "GPU is lost (fell off the bus or lost power: Xid 79): drain the node, then reset or reseat the GPU",
    "NoPermission": "no permission to read this GPU (outside this job's device cgroup, or the device file's"
                    " permissions): qualify the node in a job that holds every GPU",
    "ResetRequired": "the GPU needs a reset (nvidia-smi -r) before it can be used",
    "Unknown": "NVML cannot read this GPU (unknown error): check `nvidia-smi` and `dmesg` for Xid errors",
}
"""NVML errors that make a whole GPU unreadable (by pynvml's class-name suffix), and what to do."""


def device_gone(exc: Exception) -> str | None:
    """The reason a whole GPU is unreadable, when ``exc`` says so (None: a query this GPU lacks)."""
    name = type(exc).__name__
    return next((why for suffix, why in GONE.items() if name.endswith(f"_{suffix}")), None)


def open_device(nvml: ModuleType, index: int) -> tuple[Any, str]:
    """(handle, "") of NVML device ``index``, or (None, why) when it cannot be read at all: its
    handle refused, or its name query failing as a lost or forbidden GPU does."""
    try:
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
    except nvml.NVMLError as exc:
        return None, device_gone(exc) or nvml_failure(exc)
    why = lost(nvml, handle)
    return (None, why) if why else (handle, "")


def lost(nvml: ModuleType, handle: Any) -> str:
    """Why the GPU behind ``handle`` cannot be read any more ("" while it answers)."""
    try:
        nvml.nvmlDeviceGetName(handle)
    except nvml.NVMLError as exc:
        return device_gone(exc) or ""
    return ""


def pci_bus_id(nvml: ModuleType, handle: Any) -> str | dict[str, Any]:
    """The device's PCI bus id as NVML writes it (``00000000:1B:00.0``), or why not."""
    try:
        value = nvml.nvmlDeviceGetPciInfo(handle).busId
    except nvml.NVMLError as exc:
        return unavailable(nvml_failure(exc))
    return value.decode() if isinstance(value, bytes) else str(value)


def gpu_info(nvml: ModuleType | None = None) -> dict[str, Any]:
    """Driver, CUDA version and every GPU's static facts; says why when NVML is absent."""
    try:
        nvml = nvml or load_nvml()
    except ImportError:
        return unavailable("nvidia-ml-py (pynvml) is not installed")
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as exc:
        return unavailable(nvml_failure(exc))
    try:
        read = _reader(nvml)
        count = nvml.nvmlDeviceGetCount()
        return {
            "available": True,
            "driver_version": read(nvml.nvmlSystemGetDriverVersion),
            "cuda_driver_version": read(lambda: _cuda_version(nvml.nvmlSystemGetCudaDriverVersion())),
            "count": count,
            "devices": [_device_info(nvml, read, index) for index in range(count)],
        }
    finally:
        nvml.nvmlShutdown()


def gpu_count(nvml: ModuleType | None = None) -> int:
    """How many GPUs NVML sees on this host, readable or not (0 without nvidia-ml-py or a driver)."""
    try:
        nvml = nvml or load_nvml()
    except ImportError:
        return 0
    try:
        nvml.nvmlInit()
    except nvml.NVMLError:
        return 0
    try:
        return int(nvml.nvmlDeviceGetCount())
    except nvml.NVMLError:
        return 0
    finally:
        with contextlib.suppress(nvml.NVMLError):
            nvml.nvmlShutdown()


def _reader(nvml: ModuleType) -> Callable[[Callable[[], Any]], Any]:
    def read(call: Callable[[], Any]) -> Any:
        try:
            value = call()
        except nvml.NVMLError as exc:
            return unavailable(nvml_failure(exc))
        return value.decode() if isinstance(value, bytes) else value

    return read


def _cuda_version(encoded: int) -> str:
    return f"{encoded // 1000}.{encoded % 1000 // 10}"


def _device_info(nvml: ModuleType, read: Callable[[Callable[[], Any]], Any], index: int) -> dict[str, Any]:
    handle, why = open_device(nvml, index)
    if handle is None:
        return unreadable(nvml, index, why)
    memory = read(lambda: nvml.nvmlDeviceGetMemoryInfo(handle).total)
    power_mw = read(lambda: nvml.nvmlDeviceGetPowerManagementLimit(handle))
    return {
        "index": index,
        "name": read(lambda: nvml.nvmlDeviceGetName(handle)),
        "uuid": read(lambda: nvml.nvmlDeviceGetUUID(handle)),
        "pci_bus_id": pci_bus_id(nvml, handle),
        "memory_bytes": memory,
        "power_limit_w": power_mw / 1000 if isinstance(power_mw, int | float) else power_mw,
        "max_clocks_mhz": {
            "sm": read(lambda: nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_SM)),
            "memory": read(lambda: nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_MEM)),
        },
        "compute_capability": read(lambda: ".".join(map(str, nvml.nvmlDeviceGetCudaComputeCapability(handle)))),
        "pcie": {
            "max_generation": read(lambda: nvml.nvmlDeviceGetMaxPcieLinkGeneration(handle)),
            "max_width": read(lambda: nvml.nvmlDeviceGetMaxPcieLinkWidth(handle)),
            "current_generation": read(lambda: nvml.nvmlDeviceGetCurrPcieLinkGeneration(handle)),
            "current_width": read(lambda: nvml.nvmlDeviceGetCurrPcieLinkWidth(handle)),
        },
        "nvlink_active_links": _nvlink_links(nvml, handle),
        "ecc": read(lambda: _mode_pair(nvml.nvmlDeviceGetEccMode(handle))),
        "mig": read(lambda: _mode_pair(nvml.nvmlDeviceGetMigMode(handle))),
    }


def unreadable(nvml: ModuleType, index: int, why: str) -> dict[str, Any]:
    """The entry of a GPU NVML counts but cannot read: its index, what NVML still says of its slot
    (a GPU lost after its handle was taken keeps its PCI bus id), and why."""
    entry: dict[str, Any] = {"index": index, **unavailable(why)}
    try:
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
    except nvml.NVMLError:
        return entry
    bus = pci_bus_id(nvml, handle)
    if isinstance(bus, str):
        entry["pci_bus_id"] = bus
    return entry


def _mode_pair(modes: tuple[int, int]) -> dict[str, bool]:
    current, pending = modes
    return {"enabled": bool(current), "pending": bool(pending)}


def _nvlink_links(nvml: ModuleType, handle: Any) -> int | dict[str, Any]:
    active = 0
    for link in range(nvml.NVML_NVLINK_MAX_LINKS):
        try:
            active += int(nvml.nvmlDeviceGetNvLinkState(handle, link) == nvml.NVML_FEATURE_ENABLED)
        except nvml.NVMLError as exc:
            if link == 0:
                return unavailable(f"no NVLink: {nvml_failure(exc)}")
            break
    return active


# ---------------------------------------------------------------- health (node qualification)


class NvmlUnavailable(Exception):
    """NVML cannot be used here; the message is a reason a person can act on."""


class NvmlSession:
    """NVML initialised once for a qualification (health reads, load sampling, Xid events), over
    every GPU NVML counts: ``handles[i]`` is None for a GPU that cannot be read, ``unreadable[i]``
    says why."""

    def __init__(self, nvml: ModuleType | None = None) -> None:
        try:
            self.nvml = nvml or load_nvml()
        except ImportError:
            raise NvmlUnavailable("nvidia-ml-py (pynvml) is not installed") from None
        try:
            self.nvml.nvmlInit()
        except self.nvml.NVMLError as exc:
            raise NvmlUnavailable(nvml_failure(exc)) from None
        self.read = _reader(self.nvml)
        self.handles: list[Any] = []
        self.unreadable: dict[int, str] = {}
        try:
            count = self.nvml.nvmlDeviceGetCount()
        except self.nvml.NVMLError as exc:
            raise NvmlUnavailable(nvml_failure(exc)) from None
        for index in range(count):
            handle, why = open_device(self.nvml, index)
            self.handles.append(handle)
            if handle is None:
                self.unreadable[index] = why

    def close(self) -> None:
        with contextlib.suppress(self.nvml.NVMLError):
            self.nvml.nvmlShutdown()

    def __enter__(self) -> NvmlSession:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def system(self) -> dict[str, Any]:
        return {
            "driver_version": self.read(self.nvml.nvmlSystemGetDriverVersion),
            "cuda_driver_version": self.read(lambda: _cuda_version(self.nvml.nvmlSystemGetCudaDriverVersion())),
            "count": len(self.handles),
        }

    def device_health(self, index: int) -> dict[str, Any]:
        """What says whether a GPU is healthy: ECC mode and error counts, retired pages, remapped
        rows, power limits, persistence mode, temperature thresholds, PCIe maxima. A value the GPU
        cannot report is the unavailable shape with the reason, never a zero; a GPU that cannot be
        read at all (lost, forbidden) is one unavailable entry with its index and reason."""
        nvml, read, handle = self.nvml, self.read, self.handles[index]
        if handle is None:
            return unreadable(nvml, index, self.unreadable[index])
        why = lost(nvml, handle)  # readable when opened, lost since (Xid 79 under load)
        if why:
            return unreadable(nvml, index, why)

        def ecc(error_type: int, counter: int) -> Any:
            return read(lambda: nvml.nvmlDeviceGetTotalEccErrors(handle, error_type, counter))

        def pages(cause: int) -> Any:
            found = read(lambda: nvml.nvmlDeviceGetRetiredPages(handle, cause))
            return len(found) if isinstance(found, list | tuple) else found

        power_mw = read(lambda: nvml.nvmlDeviceGetEnforcedPowerLimit(handle))
        default_mw = read(lambda: nvml.nvmlDeviceGetPowerManagementDefaultLimit(handle))
        remapped = read(lambda: nvml.nvmlDeviceGetRemappedRows(handle))
        return {
            "index": index,
            "name": read(lambda: nvml.nvmlDeviceGetName(handle)),
            "uuid": read(lambda: nvml.nvmlDeviceGetUUID(handle)),
            "pci_bus_id": pci_bus_id(nvml, handle),
            "mig": read(lambda: _mode_pair(nvml.nvmlDeviceGetMigMode(handle))),
            "ecc_mode": read(lambda: _mode_pair(nvml.nvmlDeviceGetEccMode(handle))),
            "ecc_uncorrected_volatile": ecc(nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nvml.NVML_VOLATILE_ECC),
            "ecc_uncorrected_aggregate": ecc(nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nvml.NVML_AGGREGATE_ECC),
            "ecc_corrected_volatile": ecc(nvml.NVML_MEMORY_ERROR_TYPE_CORRECTED, nvml.NVML_VOLATILE_ECC),
            "retired_pages_sbe": pages(nvml.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS),
            "retired_pages_dbe": pages(nvml.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR),
            "retired_pages_pending": read(lambda: bool(nvml.nvmlDeviceGetRetiredPagesPendingStatus(handle))),
            "remapped_rows": remapped if isinstance(remapped, dict) else {
                "corrected": remapped[0], "uncorrected": remapped[1], "pending": bool(remapped[2]),
                "failed": bool(remapped[3]),
            },
            "power_limit_w": power_mw / 1000 if isinstance(power_mw, int | float) else power_mw,
            "power_default_limit_w": default_mw / 1000 if isinstance(default_mw, int | float) else default_mw,
            "persistence_mode": read(lambda: bool(nvml.nvmlDeviceGetPersistenceMode(handle))),
            "slowdown_temperature_c": read(lambda: nvml.nvmlDeviceGetTemperatureThreshold(
                handle, nvml.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN)),
            "pcie_max_generation": read(lambda: nvml.nvmlDeviceGetMaxPcieLinkGeneration(handle)),
            "pcie_max_width": read(lambda: nvml.nvmlDeviceGetMaxPcieLinkWidth(handle)),
        }

    def load_sample(self, index: int) -> dict[str, Any]:
        """What changes under load: clock-event (throttle) reasons, temperature, PCIe link, power
        (all None for a GPU that cannot be read)."""
        nvml, handle = self.nvml, self.handles[index]
        if handle is None:
            return {}

        def value(call: Callable[[], Any]) -> Any:
            try:
                return call()
            except nvml.NVMLError:
                return None

        power_mw = value(lambda: nvml.nvmlDeviceGetPowerUsage(handle))
        return {
            "util_pct": value(lambda: nvml.nvmlDeviceGetUtilizationRates(handle).gpu),
            "throttle_bits": value(lambda: nvml.nvmlDeviceGetCurrentClocksThrottleReasons(handle)),
            "temperature_c": value(lambda: nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU)),
            "pcie_generation": value(lambda: nvml.nvmlDeviceGetCurrPcieLinkGeneration(handle)),
            "pcie_width": value(lambda: nvml.nvmlDeviceGetCurrPcieLinkWidth(handle)),
            "power_w": power_mw / 1000 if power_mw is not None else None,
            "sm_clock_mhz": value(lambda: nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM)),
        }


class XidWatch:
    """Critical Xid events delivered while it is open (NVML event set); says why where unreadable."""

    def __init__(self, session: NvmlSession) -> None:
        self.session = session
        nvml = session.nvml
        self.reason = ""
        self.event_set: Any = None
        try:
            self.event_set = nvml.nvmlEventSetCreate()
            for handle in session.handles:
                if handle is not None:  # an unreadable GPU is already a finding of its own
                    nvml.nvmlDeviceRegisterEvents(handle, nvml.nvmlEventTypeXidCriticalError, self.event_set)
        except nvml.NVMLError as exc:
            self.reason = f"Xid events not readable: {nvml_failure(exc)}"
        except AttributeError:
            self.reason = "Xid events not readable: this nvidia-ml-py has no event API"

    def drain(self) -> list[tuple[int, int]]:
        """(GPU index, Xid) of every event delivered so far."""
        if self.reason or self.event_set is None:
            return []
        nvml = self.session.nvml
        events: list[tuple[int, int]] = []
        while True:
            try:
                event = nvml.nvmlEventSetWait_v2(self.event_set, 0)
            except nvml.NVMLError:  # NVMLError_Timeout: nothing more
                return events
            try:
                index = int(nvml.nvmlDeviceGetIndex(event.device))
            except nvml.NVMLError:
                index = -1
            events.append((index, int(event.eventData)))

    def close(self) -> None:
        if self.event_set is not None:
            with contextlib.suppress(self.session.nvml.NVMLError):
                self.session.nvml.nvmlEventSetFree(self.event_set)
