"""The GPUs of this host as NVML reports them: driver, CUDA version, and each device's static
facts (name, memory, clocks, PCIe link, NVLink, ECC, MIG). The one place that loads NVML and
turns its errors into reasons a person can act on; telemetry and qualification use it too."""

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
    handle = nvml.nvmlDeviceGetHandleByIndex(index)
    memory = read(lambda: nvml.nvmlDeviceGetMemoryInfo(handle).total)
    power_mw = read(lambda: nvml.nvmlDeviceGetPowerManagementLimit(handle))
    return {
        "index": index,
        "name": read(lambda: nvml.nvmlDeviceGetName(handle)),
        "uuid": read(lambda: nvml.nvmlDeviceGetUUID(handle)),
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
    """NVML initialised once for a qualification (health reads, load sampling, Xid events)."""

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
        self.handles = [self.nvml.nvmlDeviceGetHandleByIndex(i) for i in range(self.nvml.nvmlDeviceGetCount())]

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
        cannot report is the unavailable shape with the reason, never a zero."""
        nvml, read, handle = self.nvml, self.read, self.handles[index]

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
        """What changes under load: clock-event (throttle) reasons, temperature, PCIe link, power."""
        nvml, handle = self.nvml, self.handles[index]

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
