"""A stand-in for the ``pynvml`` module that answers from a recorded trace (tests only).

It implements the NVML calls `orchestrator.sysinfo` and `orchestrator.telemetry` make, with the
same names, constants and error classes, so that the code paths a real driver takes are the
ones tested. Each `nvmlDeviceGet*` dynamic call returns the trace's current step; `advance()`
moves to the next one. Fields listed in a device's ``unsupported`` raise NVMLError_NotSupported.

The quiet-host evidence: a sample's ``processes`` lists the compute processes on that GPU
(``[{"pid": 123, "used_memory_bytes": 2**30}]``, what `nvmlDeviceGetComputeRunningProcesses`
returns; a sample without the key answers NotSupported, as a driver that cannot list them does);
its ``throttle_bits`` are the clocks-event reasons (`REASONS` names the bits). `busy_trace` builds a
run's GPUs with other processes on them and reasons held for a share of the samples.

Health reads (node qualification) answer from optional device fields, NotSupported where a trace
lacks them: ``ecc_uncorrected_volatile``, ``ecc_corrected_volatile``, ``ecc_uncorrected_aggregate``
(a number, or a list whose next item each read returns: a count that rises), ``retired_pages``
({"sbe": n, "dbe": n}), ``retired_pages_pending``, ``remapped_rows`` ([corrected, uncorrected,
pending, failed]), ``power_default_limit_w``, ``persistence_mode``, ``slowdown_temperature_c``,
``shutdown_temperature_c`` and ``xids`` (Xid events the event set delivers, once). A sample may carry
``pcie_current_generation``/``pcie_current_width`` (the link under load) over the static ones.

Failures as the real driver gives them: a device's ``fault`` ({"error": "GpuIsLost" | "NoPermission",
"at": "handle" | "queries"}) makes `nvmlDeviceGetHandleByIndex` raise for that index ("handle": a GPU
outside a Slurm device cgroup, or one the driver already lost), or every query on its handle raise
("queries": a GPU that fell off the bus after the handle was taken, the classic Xid 79). ``pci_bus_id``
names a device's slot (default: one per index, in index order); `node_trace` builds a node of named
models, in any NVML order, with MIG on where asked; `cuda_order` is the order CUDA numbers them in.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

TRACE = Path(__file__).with_name("data") / "nvml_trace_2gpu.json"

NVML_CLOCK_SM = 1
NVML_CLOCK_MEM = 2
NVML_TEMPERATURE_GPU = 0
NVML_NVLINK_MAX_LINKS = 18
NVML_FEATURE_ENABLED = 1
NVML_MEMORY_ERROR_TYPE_CORRECTED = 0
NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
NVML_VOLATILE_ECC = 0
NVML_AGGREGATE_ECC = 1
NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS = 0
NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR = 1
NVML_TEMPERATURE_THRESHOLD_SHUTDOWN = 0
NVML_TEMPERATURE_THRESHOLD_SLOWDOWN = 1
nvmlEventTypeXidCriticalError = 0x8  # noqa: N816 - pynvml's name


class NVMLError(Exception):
    pass


class NVMLError_NotSupported(NVMLError):  # noqa: N801 - pynvml's own class names
    pass


class NVMLError_LibraryNotFound(NVMLError):  # noqa: N801
    pass


class NVMLError_Timeout(NVMLError):  # noqa: N801
    pass


class NVMLError_NotFound(NVMLError):  # noqa: N801
    pass


class NVMLError_InvalidArgument(NVMLError):  # noqa: N801
    pass


class NVMLError_GpuIsLost(NVMLError):  # noqa: N801
    """NVML_ERROR_GPU_IS_LOST: the GPU fell off the bus (Xid 79) or is otherwise inaccessible."""

    def __str__(self) -> str:
        return "GPU is lost"


class NVMLError_NoPermission(NVMLError):  # noqa: N801
    """NVML_ERROR_NO_PERMISSION: e.g. a GPU outside this job's device cgroup."""

    def __str__(self) -> str:
        return "Insufficient Permissions"


FAULTS = {"GpuIsLost": NVMLError_GpuIsLost, "NoPermission": NVMLError_NoPermission}


# Clocks-event reason bits as nvml.h defines them, under pynvml's new and deprecated names.
REASONS = {"GpuIdle": 0x1, "ApplicationsClocksSetting": 0x2, "SwPowerCap": 0x4, "HwSlowdown": 0x8,
            "SyncBoost": 0x10, "SwThermalSlowdown": 0x20, "HwThermalSlowdown": 0x40, "HwPowerBrakeSlowdown": 0x80,
            "DisplayClockSetting": 0x100}


class FakeNvml:
    """Module-like object: pass it wherever the code takes ``nvml``."""

    NVMLError = NVMLError
    NVML_CLOCK_SM = NVML_CLOCK_SM
    NVML_CLOCK_MEM = NVML_CLOCK_MEM
    NVML_TEMPERATURE_GPU = NVML_TEMPERATURE_GPU
    NVML_NVLINK_MAX_LINKS = NVML_NVLINK_MAX_LINKS
    NVML_FEATURE_ENABLED = NVML_FEATURE_ENABLED
    NVMLError_Timeout = NVMLError_Timeout
    NVMLError_GpuIsLost = NVMLError_GpuIsLost
    NVMLError_NoPermission = NVMLError_NoPermission
    NVML_MEMORY_ERROR_TYPE_CORRECTED = NVML_MEMORY_ERROR_TYPE_CORRECTED
    NVML_MEMORY_ERROR_TYPE_UNCORRECTED = NVML_MEMORY_ERROR_TYPE_UNCORRECTED
    NVML_VOLATILE_ECC = NVML_VOLATILE_ECC
    NVML_AGGREGATE_ECC = NVML_AGGREGATE_ECC
    NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS = (
        NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS)
    NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR = NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR
    NVML_TEMPERATURE_THRESHOLD_SHUTDOWN = NVML_TEMPERATURE_THRESHOLD_SHUTDOWN
    NVML_TEMPERATURE_THRESHOLD_SLOWDOWN = NVML_TEMPERATURE_THRESHOLD_SLOWDOWN
    nvmlEventTypeXidCriticalError = nvmlEventTypeXidCriticalError  # noqa: N815

    def __init__(self, trace: dict[str, Any] | None = None, *, missing_library: bool = False) -> None:
        self.trace = trace if trace is not None else json.loads(TRACE.read_text())
        self.missing_library = missing_library
        self.step = 0
        self.initialised = 0
        self.reads: dict[tuple[int, str], int] = {}
        self.deprecated_calls = 0

    def advance(self) -> None:
        self.step = min(self.step + 1, len(self.trace["samples"]) - 1)

    # -- library
    def nvmlInit(self) -> None:  # noqa: N802 - NVML names
        if self.missing_library:
            raise NVMLError_LibraryNotFound("NVML Shared Library Not Found")
        self.initialised += 1

    def nvmlShutdown(self) -> None:  # noqa: N802
        self.initialised -= 1

    def nvmlSystemGetDriverVersion(self) -> str:  # noqa: N802
        return self.trace["driver_version"]

    def nvmlSystemGetCudaDriverVersion(self) -> int:  # noqa: N802
        return self.trace["cuda_driver_version"]

    def nvmlDeviceGetCount(self) -> int:  # noqa: N802
        return len(self.trace["devices"])

    def _fault(self, index: int, at: str) -> None:
        fault = self.trace["devices"][index].get("fault")
        if fault and fault.get("at", "queries") == at:
            raise FAULTS[fault["error"]]()

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:  # noqa: N802
        if not 0 <= index < len(self.trace["devices"]):
            raise NVMLError_InvalidArgument("Invalid Argument")
        self._fault(index, "handle")
        return index

    def nvmlDeviceGetIndex(self, handle: int) -> int:  # noqa: N802
        return handle

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> int:  # noqa: N802
        for index, device in enumerate(self.trace["devices"]):
            if device["uuid"] == uuid:
                self._fault(index, "handle")
                return index
        raise NVMLError_NotFound("Not Found")

    def nvmlDeviceGetHandleByPciBusId(self, bus_id: str) -> int:  # noqa: N802
        for index, device in enumerate(self.trace["devices"]):
            if pci_bus_id(device, index).upper() == bus_id.upper():
                self._fault(index, "handle")
                return index
        raise NVMLError_NotFound("Not Found")

    def nvmlDeviceGetPciInfo(self, h: int) -> SimpleNamespace:  # noqa: N802
        bus_id = pci_bus_id(self.trace["devices"][h], h)
        domain, bus, rest = bus_id.split(":")
        return SimpleNamespace(busId=bus_id.encode(), busIdLegacy=f"{domain[-4:]}:{bus}:{rest}".encode(),
                               domain=int(domain, 16), bus=int(bus, 16), device=int(rest.split(".")[0], 16))

    # -- static facts
    def _static(self, handle: int, key: str) -> Any:
        device = self.trace["devices"][handle]
        if key in device.get("unsupported", []):
            raise NVMLError_NotSupported("Not Supported")
        return device[key]

    def nvmlDeviceGetName(self, h: int) -> bytes:  # noqa: N802 - old pynvml returned bytes
        return self._static(h, "name").encode()

    def nvmlDeviceGetUUID(self, h: int) -> str:  # noqa: N802
        return self._static(h, "uuid")

    def nvmlDeviceGetMemoryInfo(self, h: int) -> SimpleNamespace:  # noqa: N802
        used = self._sample(h)["memory_used_bytes"]
        return SimpleNamespace(total=self._static(h, "memory_bytes"), used=used)

    def nvmlDeviceGetPowerManagementLimit(self, h: int) -> int:  # noqa: N802
        return int(self._static(h, "power_limit_w") * 1000)

    def nvmlDeviceGetMaxClockInfo(self, h: int, clock: int) -> int:  # noqa: N802
        return self._static(h, "max_sm_mhz" if clock == NVML_CLOCK_SM else "max_memory_mhz")

    def nvmlDeviceGetCudaComputeCapability(self, h: int) -> tuple[int, int]:  # noqa: N802
        return tuple(self._static(h, "compute_capability"))

    def nvmlDeviceGetMaxPcieLinkGeneration(self, h: int) -> int:  # noqa: N802
        return self._static(h, "pcie_max_generation")

    def nvmlDeviceGetMaxPcieLinkWidth(self, h: int) -> int:  # noqa: N802
        return self._static(h, "pcie_max_width")

    def nvmlDeviceGetCurrPcieLinkGeneration(self, h: int) -> int:  # noqa: N802
        return self._sample(h).get("pcie_current_generation", self._static(h, "pcie_current_generation"))

    def nvmlDeviceGetCurrPcieLinkWidth(self, h: int) -> int:  # noqa: N802
        return self._sample(h).get("pcie_current_width", self._static(h, "pcie_current_width"))

    def nvmlDeviceGetNvLinkState(self, h: int, link: int) -> int:  # noqa: N802
        links = self._static(h, "nvlink_links")
        if link >= links:
            raise NVMLError_NotSupported("Not Supported")
        return NVML_FEATURE_ENABLED

    def nvmlDeviceGetEccMode(self, h: int) -> tuple[int, int]:  # noqa: N802
        return tuple(self._static(h, "ecc"))

    def nvmlDeviceGetMigMode(self, h: int) -> tuple[int, int]:  # noqa: N802
        return tuple(self._static(h, "mig"))

    # -- dynamic readings
    def _sample(self, handle: int) -> dict[str, Any]:
        return self.trace["samples"][self.step][handle]

    def _dynamic(self, handle: int, key: str) -> Any:
        value = self._sample(handle)[key]
        if value is None:
            raise NVMLError_NotSupported("Not Supported")
        return value

    def nvmlDeviceGetUtilizationRates(self, h: int) -> SimpleNamespace:  # noqa: N802
        return SimpleNamespace(gpu=self._dynamic(h, "util_pct"), memory=0)

    def nvmlDeviceGetPowerUsage(self, h: int) -> int:  # noqa: N802
        return int(self._dynamic(h, "power_w") * 1000)

    def nvmlDeviceGetTemperature(self, h: int, sensor: int) -> int:  # noqa: N802
        return self._dynamic(h, "temperature_c")

    def nvmlDeviceGetClockInfo(self, h: int, clock: int) -> int:  # noqa: N802
        return self._dynamic(h, "sm_clock_mhz")

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: int) -> int:  # noqa: N802
        return self._dynamic(h, "throttle_bits")

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, h: int) -> int:  # noqa: N802 - deprecated name
        self.deprecated_calls += 1
        return self._dynamic(h, "throttle_bits")

    def nvmlDeviceGetTotalEnergyConsumption(self, h: int) -> int:  # noqa: N802
        return self._dynamic(h, "energy_mj")

    def nvmlDeviceGetComputeRunningProcesses(self, h: int) -> list[SimpleNamespace]:  # noqa: N802
        processes = self._sample(h).get("processes")
        if processes is None:
            raise NVMLError_NotSupported("Not Supported")
        return [SimpleNamespace(pid=p["pid"], usedGpuMemory=p.get("used_memory_bytes")) for p in processes]

    # -- health (node qualification)
    def _health(self, handle: int, key: str) -> Any:
        device = self.trace["devices"][handle]
        if key not in device or key in device.get("unsupported", []):
            raise NVMLError_NotSupported("Not Supported")
        value = device[key]
        if isinstance(value, list) and key.startswith("ecc_"):
            read = self.reads.get((handle, key), 0)
            self.reads[handle, key] = read + 1
            return value[min(read, len(value) - 1)]
        return value

    def nvmlDeviceGetTotalEccErrors(self, h: int, error_type: int, counter_type: int) -> int:  # noqa: N802
        kind = "uncorrected" if error_type == NVML_MEMORY_ERROR_TYPE_UNCORRECTED else "corrected"
        counter = "aggregate" if counter_type == NVML_AGGREGATE_ECC else "volatile"
        return self._health(h, f"ecc_{kind}_{counter}")

    def nvmlDeviceGetRetiredPages(self, h: int, cause: int) -> list[int]:  # noqa: N802
        pages = self._health(h, "retired_pages")
        count = pages["dbe" if cause == NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR else "sbe"]
        return [0x1000 * (i + 1) for i in range(count)]

    def nvmlDeviceGetRetiredPagesPendingStatus(self, h: int) -> int:  # noqa: N802
        return int(self._health(h, "retired_pages_pending"))

    def nvmlDeviceGetRemappedRows(self, h: int) -> tuple[int, int, int, int]:  # noqa: N802
        return tuple(self._health(h, "remapped_rows"))

    def nvmlDeviceGetPowerManagementDefaultLimit(self, h: int) -> int:  # noqa: N802
        return int(self._health(h, "power_default_limit_w") * 1000)

    def nvmlDeviceGetEnforcedPowerLimit(self, h: int) -> int:  # noqa: N802
        return int(self._static(h, "power_limit_w") * 1000)

    def nvmlDeviceGetPersistenceMode(self, h: int) -> int:  # noqa: N802
        return int(self._health(h, "persistence_mode"))

    def nvmlDeviceGetTemperatureThreshold(self, h: int, threshold: int) -> int:  # noqa: N802
        key = "slowdown_temperature_c" if threshold == NVML_TEMPERATURE_THRESHOLD_SLOWDOWN else "shutdown_temperature_c"
        return self._health(h, key)

    # -- events (Xid)
    def nvmlEventSetCreate(self) -> str:  # noqa: N802
        return "event-set"

    def nvmlDeviceRegisterEvents(self, h: int, types: int, event_set: str) -> None:  # noqa: N802
        if "xids" not in self.trace["devices"][h]:
            raise NVMLError_NotSupported("Not Supported")

    def nvmlEventSetWait_v2(self, event_set: str, timeout_ms: int) -> SimpleNamespace:  # noqa: N802
        pending = [
            (index, xid) for index, device in enumerate(self.trace["devices"]) for xid in device.get("xids", [])]
        if not pending:
            raise NVMLError_Timeout("Timeout")
        index, xid = pending[0]
        self.trace["devices"][index]["xids"].remove(xid)
        return SimpleNamespace(device=index, eventType=nvmlEventTypeXidCriticalError, eventData=xid)

    def nvmlEventSetFree(self, event_set: str) -> None:  # noqa: N802
        pass


def _guarded(call):  # noqa: ANN001, ANN202 - wraps the per-device queries below
    def query(self: FakeNvml, handle: int, *args: Any) -> Any:
        self._fault(handle, "queries")
        return call(self, handle, *args)

    query.__name__ = call.__name__
    return query


for _name in [n for n in vars(FakeNvml) if n.startswith("nvmlDevice") and n not in (
        "nvmlDeviceGetCount", "nvmlDeviceGetHandleByIndex", "nvmlDeviceGetHandleByUUID",
        "nvmlDeviceGetHandleByPciBusId")]:
    setattr(FakeNvml, _name, _guarded(getattr(FakeNvml, _name)))


def pci_bus_id(device: dict[str, Any], index: int) -> str:
    """A device's PCI bus id as NVML writes it (``00000000:1B:00.0``): its own, else one per index."""
    return device.get("pci_bus_id") or f"00000000:{0x18 + 0x10 * index:02X}:00.0"


for _suffix, _bit in REASONS.items():  # pynvml's constants, new and deprecated names
    setattr(FakeNvml, f"nvmlClocksEventReason{_suffix}", _bit)
    setattr(FakeNvml, f"nvmlClocksThrottleReason{_suffix}", _bit)


class LegacyFakeNvml(FakeNvml):
    """A pynvml from before NVML 535 renamed throttle reasons to clocks events: only the old names."""

    nvmlDeviceGetCurrentClocksEventReasons = None


for _suffix in REASONS:
    setattr(LegacyFakeNvml, f"nvmlClocksEventReason{_suffix}", None)


def eight_gpu_trace(busy: tuple[int, ...] = (2, 5), steps: int = 12) -> dict[str, Any]:
    """A host of eight GPUs of which ``busy`` train (95 % busy, 400 W) and the rest idle (0 %, 60 W,
    clocks down for idleness); the 2-GPU trace's static facts for each device."""
    base = json.loads(TRACE.read_text())
    devices = [{**base["devices"][0], "uuid": f"GPU-fake-{i:04d}"} for i in range(8)]
    samples = []
    for _ in range(steps):
        row = []
        for i in range(8):
            working = i in busy
            row.append({"util_pct": 95.0 if working else 0.0, "memory_used_bytes": 40 * 2**30 if working else 0,
                        "power_w": 400.0 if working else 60.0, "temperature_c": 70.0 if working else 35.0,
                        "sm_clock_mhz": 1410.0 if working else 210.0, "throttle_bits": 0 if working else 0x1,
                        "energy_mj": None})  # power is integrated: the test's clock is not the trace's
        samples.append(row)
    return {**base, "devices": devices, "samples": samples}


def busy_trace(*, own_pid: int, steps: int = 10, other_pids: tuple[int, ...] = (), others_from: int = 0,
               reasons: tuple[str, ...] = (), reasons_from: int = 0) -> dict[str, Any]:
    """The 2-GPU trace's devices training for ``steps`` samples (95 %, 300 W), the seed's process
    ``own_pid`` on each; from sample ``others_from`` on, ``other_pids`` run on GPU 0 too, and from
    ``reasons_from`` on the clocks-event ``reasons`` (names of `REASONS`) hold both GPUs' clocks."""
    base = json.loads(TRACE.read_text())
    bits = sum(REASONS[name] for name in reasons)
    samples = []
    for step in range(steps):
        row = []
        for index in range(len(base["devices"])):
            pids = [own_pid, *(other_pids if index == 0 and step >= others_from else ())]
            row.append({"util_pct": 95.0, "memory_used_bytes": 20 * 2**30, "power_w": 300.0, "temperature_c": 70.0,
                        "sm_clock_mhz": 1410.0, "throttle_bits": bits if reasons and step >= reasons_from else 0,
                        "energy_mj": None, "processes": [{"pid": pid, "used_memory_bytes": 2**30} for pid in pids]})
        samples.append(row)
    return {**base, "samples": samples}


MODELS: dict[str, dict[str, Any]] = {
    "NVIDIA A100-SXM4-80GB": {"memory_bytes": 85899345920, "power_limit_w": 400.0, "compute_capability": [8, 0],
                              "max_sm_mhz": 1410, "sm_count": 108},
    "NVIDIA H100 80GB HBM3": {"memory_bytes": 85520809984, "power_limit_w": 700.0, "compute_capability": [9, 0],
                              "max_sm_mhz": 1980, "sm_count": 132},
    "NVIDIA L4": {"memory_bytes": 24152899584, "power_limit_w": 72.0, "compute_capability": [8, 9],
                  "max_sm_mhz": 2040, "sm_count": 58},
    "Tesla T4": {"memory_bytes": 16106127360, "power_limit_w": 70.0, "compute_capability": [7, 5],
                 "max_sm_mhz": 1590, "sm_count": 40},
}
"""Static facts of the models `node_trace` knows (as NVML reports them), and each one's SM count."""


def node_trace(models: list[str], *, pci_bus_ids: list[str] | None = None, mig: tuple[int, ...] = (),
               faults: dict[int, dict[str, str]] | None = None) -> dict[str, Any]:
    """A node of ``len(models)`` GPUs, NVML index i being ``models[i]`` in slot ``pci_bus_ids[i]``
    (NVML's order need not be the slots' order), MIG on for the indices in ``mig``, ``faults`` by
    index; the 2-GPU trace's other facts, one idle sample."""
    base = json.loads(TRACE.read_text())
    template = base["devices"][0]
    devices, sample = [], []
    for index, model in enumerate(models):
        device = {**template, **{k: v for k, v in MODELS[model].items()}, "name": model,
                  "uuid": f"GPU-{index:08x}-fake-{model.split()[-1].lower()}", "unsupported": [],
                  "mig": [1, 1] if index in mig else [0, 0]}
        if pci_bus_ids:
            device["pci_bus_id"] = pci_bus_ids[index]
        if faults and index in faults:
            device["fault"] = faults[index]
        devices.append(device)
        sample.append(dict(base["samples"][0][0]))
    return {**base, "devices": devices, "samples": [sample]}


def cuda_order(trace: dict[str, Any], device_order: str | None) -> list[int]:
    """The NVML indices in the order CUDA numbers the GPUs: PCI bus order under
    ``CUDA_DEVICE_ORDER=PCI_BUS_ID``, else CUDA's default FASTEST_FIRST (here: more SMs first, ties
    in PCI bus order), which differs from NVML's on a node of mixed models."""
    devices = trace["devices"]
    by_slot = sorted(range(len(devices)), key=lambda i: pci_bus_id(devices[i], i))
    if device_order == "PCI_BUS_ID":
        return by_slot
    return sorted(by_slot, key=lambda i: -devices[i].get("sm_count", 0))
