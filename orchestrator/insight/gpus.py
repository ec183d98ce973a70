"""The GPUs of this host as NVML reports them: driver, CUDA version, and each device's static
facts (name, memory, clocks, PCIe link, NVLink, ECC, MIG). The one place that loads NVML and
turns its errors into reasons a person can act on; telemetry and qualification use it too."""

from __future__ import annotations

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
