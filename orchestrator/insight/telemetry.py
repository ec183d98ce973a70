"""Hardware telemetry during one seed, and what it tells: energy-to-train, power, throttling, bottlenecks.

    with TelemetrySampler(seed_paths.telemetry, data_dir):   # 1 Hz by default
        ... run the seed ...
    series = load_series(seed_paths.telemetry)
    energy = energy_to_train(series, record.run_start_ms, record.run_stop_ms)

A sampler thread reads the run's GPUs through a `GpuSource` (NVML live, or a recorded trace in
tests) and the host through psutil: CPU busy and iowait, memory used, and the read rate and
busy time of the block device holding the dataset. The series is stored column-wise (one list
per quantity) with Unix-epoch millisecond timestamps, the clock MLLOG uses, so run_start and
run_stop times from the log cut it directly.

Only the GPUs the run was given are sampled (the runner's `sampled_gpus`: ``--gpus`` device ids,
the first N for a count, or ``CUDA_VISIBLE_DEVICES``), so that energy and utilisation are the
run's, not the host's. An index is CUDA's for the local and Slurm runners: mltrain starts every job
with ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` (CUDA's default numbers the fastest GPU first, which on a
node of mixed models is not NVML's order), so the run's GPU k is found as the k-th in PCI bus
order, never by NVML's index, which NVML does not promise to be that order. Docker's device ids are
NVML's indices (the runner's `gpu_numbering`). UUIDs (``GPU-...``) name a device exactly. A GPU that
cannot be read (lost, outside the job's cgroup) is named with its reason, not sampled.
"""

from __future__ import annotations

import contextlib
import functools
import json
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import psutil

from orchestrator.errors import RecordError, UsageError
from orchestrator.insight import gpus, sysinfo
from orchestrator.insight.unavailable import unavailable
from orchestrator.results import atomic
from orchestrator.results.series import GPU_COLUMNS, SERIES_VERSION

CLOCKS_EVENT_REASONS: dict[str, str] = {
    "GpuIdle": "gpu_idle",
    "ApplicationsClocksSetting": "applications_clocks_setting",
    "SwPowerCap": "sw_power_cap",
    "HwSlowdown": "hw_slowdown",
    "SyncBoost": "sync_boost",
    "SwThermalSlowdown": "sw_thermal_slowdown",
    "HwThermalSlowdown": "hw_thermal_slowdown",
    "HwPowerBrakeSlowdown": "hw_power_brake_slowdown",
    "DisplayClockSetting": "display_clock_setting",
}
"""NVML's clocks-event ("throttle") reasons by the suffix of pynvml's constants
(``nvmlClocksEventReason<Suffix>``; before NVML 535 renamed them, ``nvmlClocksThrottleReason<Suffix>``),
and the names stored series use for them. The bit values come from pynvml, not from here."""
REAL_THROTTLING = frozenset(
    {"sw_power_cap", "hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown"}
)
GPU_FIELDS = GPU_COLUMNS


def reason_bits(nvml: ModuleType) -> dict[int, str]:
    """Bit -> reason name, from the module's own constants (the deprecated names as a fallback)."""
    table: dict[int, str] = {}
    for suffix, name in CLOCKS_EVENT_REASONS.items():
        bit = getattr(nvml, f"nvmlClocksEventReason{suffix}", None)
        if bit is None:
            bit = getattr(nvml, f"nvmlClocksThrottleReason{suffix}", None)
        if bit:
            table[int(bit)] = name
    return table


@functools.cache
def _pynvml_reason_bits() -> dict[int, str]:
    return reason_bits(gpus.load_nvml())


def throttle_reasons(bits: int, nvml: ModuleType | None = None) -> list[str]:
    """The reasons set in a clocks-event bitmask, in pynvml's bit order."""
    table = reason_bits(nvml) if nvml is not None else _pynvml_reason_bits()
    return [name for bit, name in sorted(table.items()) if bits & bit]


def clocks_event_reasons_call(nvml: ModuleType) -> Any:
    """``nvmlDeviceGetCurrentClocksEventReasons``, or the deprecated throttle-reasons call on a
    pynvml that predates it."""
    current = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
    return current or nvml.nvmlDeviceGetCurrentClocksThrottleReasons


# ---------------------------------------------------------------- GPU sources


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


class TraceGpuSource(GpuSource):
    """Replays a recorded trace (`record_gpu_trace` output); after its end, repeats the last sample."""

    def __init__(self, trace: dict[str, Any]) -> None:
        self.devices = [d["name"] if isinstance(d, dict) else d for d in trace["devices"]]
        fields = set(GPU_FIELDS)
        self.samples = [[GpuSample(**{k: v for k, v in gpu.items() if k in fields}) for gpu in step]
                        for step in trace["samples"]]
        if not self.samples or any(len(step) != len(self.devices) for step in self.samples):
            raise ValueError("trace needs at least one sample with one entry per device")
        self.position = 0

    @classmethod
    def from_file(cls, path: Path) -> TraceGpuSource:
        return cls(json.loads(path.read_text()))

    def describe(self) -> dict[str, Any]:
        return {"available": True, "devices": self.devices, "source": "recorded trace"}

    def sample(self) -> list[GpuSample]:
        step = self.samples[min(self.position, len(self.samples) - 1)]
        self.position += 1
        return step


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


def record_gpu_trace(source: GpuSource, samples: int, interval_s: float) -> dict[str, Any]:
    """Record ``samples`` readings of a live source, in the format `TraceGpuSource` replays."""
    steps = []
    for index in range(samples):
        if index:
            time.sleep(interval_s)
        steps.append([asdict(gpu) for gpu in source.sample()])
    return {"devices": source.describe().get("devices", []), "samples": steps}


# ---------------------------------------------------------------- host probe


@dataclass(frozen=True, kw_only=True)
class HostSample:
    """Host counters at one instant (cumulative where the kernel counts)."""

    cpu_busy_s: float
    """user+nice+system+irq+softirq+steal, all CPUs."""
    cpu_iowait_s: float
    """Time waiting for I/O."""
    cpu_total_s: float
    """All time."""
    memory_used_bytes: int | None
    """Total minus available memory."""
    disk_read_bytes: int | None
    """Bytes read from the dataset device."""
    disk_busy_ms: int | None
    """Milliseconds the dataset device was busy."""


class HostProbe:
    """Reads CPU times, memory and the dataset device's counters through psutil (or a module
    with its API, in tests)."""

    def __init__(self, disk: str | None, counters: Any = psutil) -> None:
        self.disk = disk
        self.counters = counters

    def read(self) -> HostSample:
        cpu = self.counters.cpu_times()
        busy = cpu.user + cpu.nice + cpu.system + sum(getattr(cpu, f, 0.0) for f in ("irq", "softirq", "steal"))
        iowait = getattr(cpu, "iowait", 0.0)
        memory = self.counters.virtual_memory()
        read_bytes, busy_ms = self._disk()
        return HostSample(
            cpu_busy_s=busy,
            cpu_iowait_s=iowait,
            cpu_total_s=busy + cpu.idle + iowait,
            memory_used_bytes=int(memory.total - memory.available),
            disk_read_bytes=read_bytes,
            disk_busy_ms=busy_ms,
        )

    def _disk(self) -> tuple[int | None, int | None]:
        if self.disk is None:
            return None, None
        device = (self.counters.disk_io_counters(perdisk=True) or {}).get(self.disk)
        if device is None:
            return None, None
        return int(device.read_bytes), getattr(device, "busy_time", None)


def dataset_disk(data_dir: Path) -> tuple[str | None, str]:
    """The block device holding ``data_dir`` (for /proc/diskstats), or None and why not."""
    try:
        mount = sysinfo.mount_of(data_dir, sysinfo.mounts())
    except OSError as exc:
        return None, f"cannot read the mount table: {exc.strerror}"
    if mount is None:
        return None, f"no mount holds {data_dir}"
    if mount.fstype in sysinfo.NETWORK_FILESYSTEMS:
        return None, f"{mount.fstype} is a network filesystem: no local device to watch"
    device = sysinfo.block_device(mount.device_number)
    if device is None:
        return None, f"{mount.fstype} at {mount.mount_point}: backing block device not visible here"
    return device, ""


# ---------------------------------------------------------------- the sampler


@dataclass
class _Columns:
    """The series being built (one list per quantity)."""

    t_ms: list[int] = field(default_factory=list)
    cpu_pct: list[float | None] = field(default_factory=list)
    iowait_pct: list[float | None] = field(default_factory=list)
    memory_used_bytes: list[int | None] = field(default_factory=list)
    disk_read_bytes_per_s: list[float | None] = field(default_factory=list)
    disk_busy_pct: list[float | None] = field(default_factory=list)
    gpus: list[dict[str, list[Any]]] = field(default_factory=list)


class TelemetrySampler:
    """Samples GPUs and host every ``interval_s`` on a thread; writes the series on stop."""

    def __init__(
        self,
        path: Path,
        data_dir: Path,
        interval_s: float = 1.0,
        *,
        gpus: tuple[str, ...] | None = None,
        numbering: str = "cuda",
        gpu_source: GpuSource | None = None,
        host_probe: HostProbe | None = None,
    ) -> None:
        if not interval_s > 0:
            raise ValueError(f"interval_s must be positive, got {interval_s}")
        self.path = path
        self.data_dir = data_dir
        self.interval_s = interval_s
        self.gpus = gpus
        """The run's GPUs (indices or UUIDs; None: every GPU of the host)."""
        self.numbering = numbering
        """Whose indices ``gpus`` holds: "cuda" (CUDA_VISIBLE_DEVICES) or "nvml" (Docker's device ids)."""
        self._gpu_source = gpu_source
        self._host_probe = host_probe
        self._disk_note = ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._columns = _Columns()
        self._previous: HostSample | None = None
        self._previous_t: float | None = None
        self._errors: list[str] = []

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("sampler already started")
        if self._gpu_source is None:
            self._gpu_source = open_gpu_source(devices=self.gpus, numbering=self.numbering)
        if self._host_probe is None:
            disk, self._disk_note = dataset_disk(self.data_dir)
            self._host_probe = HostProbe(disk)
        elif self._host_probe.disk is None:
            self._disk_note = "no dataset device given"
        self._take_sample()
        self._thread = threading.Thread(target=self._loop, name="mltrain-telemetry", daemon=True)
        self._thread.start()

    def stop(self) -> dict[str, Any]:
        """Stop sampling (one last sample), write the series atomically and return it."""
        if self._thread is None:
            raise RuntimeError("sampler was not started")
        self._stop.set()
        self._thread.join()
        self._take_sample()
        assert self._gpu_source is not None
        self._gpu_source.close()
        series = self.series()
        atomic.write_text(self.path, json.dumps(series, separators=(",", ":")) + "\n")
        return series

    def __enter__(self) -> TelemetrySampler:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def series(self) -> dict[str, Any]:
        assert self._gpu_source is not None and self._host_probe is not None
        columns = asdict(self._columns)
        gpus = columns.pop("gpus")
        return {
            "version": SERIES_VERSION,
            "interval_s": self.interval_s,
            "gpu_source": self._gpu_source.describe(),
            "dataset_device": self._host_probe.disk or unavailable(self._disk_note),
            "host": columns,
            "gpus": gpus,
            "sampling_errors": self._errors[:20],
        }

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._take_sample()

    def _take_sample(self) -> None:
        assert self._gpu_source is not None and self._host_probe is not None
        now = time.time()
        try:
            host = self._host_probe.read()
            gpus = self._gpu_source.sample()
        except Exception as exc:  # telemetry is best effort: it must never fail the seed it watches
            if len(self._errors) < 100:
                self._errors.append(f"{int(now * 1000)}: {type(exc).__name__}: {exc}")
            return
        columns = self._columns
        columns.t_ms.append(int(now * 1000))
        columns.memory_used_bytes.append(host.memory_used_bytes)
        previous, elapsed = self._previous, (now - self._previous_t) if self._previous_t else None
        columns.cpu_pct.append(_share(host.cpu_busy_s, host.cpu_total_s, previous, "cpu_busy_s"))
        columns.iowait_pct.append(_share(host.cpu_iowait_s, host.cpu_total_s, previous, "cpu_iowait_s"))
        read_before = previous.disk_read_bytes if previous else None
        io_before = previous.disk_busy_ms if previous else None
        columns.disk_read_bytes_per_s.append(_rate(host.disk_read_bytes, read_before, elapsed, 1.0))
        busy = _rate(host.disk_busy_ms, io_before, elapsed, 0.1)  # ms busy per s -> percent
        columns.disk_busy_pct.append(min(busy, 100.0) if busy is not None else None)
        self._previous, self._previous_t = host, now
        while len(columns.gpus) < len(gpus):
            columns.gpus.append({name: [None] * (len(columns.t_ms) - 1) for name in GPU_FIELDS})
        for index, gpu in enumerate(gpus):
            for name in GPU_FIELDS:
                columns.gpus[index][name].append(getattr(gpu, name))


def _share(value: float, total: float, previous: HostSample | None, name: str) -> float | None:
    if previous is None:
        return None
    spent = total - previous.cpu_total_s
    return round(100.0 * (value - getattr(previous, name)) / spent, 2) if spent > 0 else None


def _rate(value: int | None, before: int | None, elapsed: float | None, scale: float) -> float | None:
    if value is None or before is None or not elapsed:
        return None
    return round((value - before) * scale / elapsed, 2)


def load_series(path: Path) -> dict[str, Any]:
    """A stored series, validated (`orchestrator.results.series`): RecordError naming the file and
    the field when it has another shape."""
    from orchestrator.results.series import TelemetrySeries
    from orchestrator.results.store import read_record

    series = read_record(path, TelemetrySeries)
    if series is None:
        raise RecordError(f"{path}: missing")
    return series.model_dump(mode="python")


def record_trace_file(path: Path, samples: int, interval_s: float, status: Callable[[str], None]) -> None:
    """Record what the live sampler reads into ``path``, in the format `TraceGpuSource` replays
    (for tests on machines without GPUs). UsageError when there is no GPU to read."""
    source = open_gpu_source()
    description = source.describe()
    if not description.get("available"):
        raise UsageError(f"cannot record a GPU trace: {description.get('reason')}")
    status(f"recording {samples} readings of {len(description['devices'])} GPU(s) every {interval_s:g} s")
    try:
        trace = record_gpu_trace(source, samples, interval_s)
    finally:
        source.close()
    trace["gpus"] = gpus.gpu_info()
    atomic.write_json(path, trace)
