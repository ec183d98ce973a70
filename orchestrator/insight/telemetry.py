"""Hardware telemetry during one seed, and what it tells: energy-to-train, power, throttling, bottlenecks.

    with TelemetrySampler(seed_paths.telemetry, data_dir):   # 1 Hz by default
        ... run the seed ...
    series = load_series(seed_paths.telemetry)
    energy = energy_to_train(series, record.run_start_ms, record.run_stop_ms)

A sampler thread reads every GPU through a `GpuSource` (NVML live, or a recorded trace in
tests) and the host through /proc: CPU busy and iowait, memory used, and the read rate and
busy time of the block device holding the dataset. The series is stored column-wise (one list
per quantity) with Unix-epoch millisecond timestamps, the clock MLLOG uses, so run_start and
run_stop times from the log cut it directly.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from orchestrator.errors import UsageError
from orchestrator.insight import gpus, sysinfo
from orchestrator.insight.unavailable import unavailable
from orchestrator.results import atomic

SERIES_VERSION = 1
SECTOR_BYTES = 512  # /proc/diskstats counts 512-byte sectors whatever the device's block size

# NVML clock-event ("throttle") reason bits, as nvml.h defines them.
THROTTLE_BITS: dict[int, str] = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
REAL_THROTTLING = frozenset(
    {"sw_power_cap", "hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown"}
)
GPU_FIELDS = ("util_pct", "memory_used_bytes", "power_w", "temperature_c", "sm_clock_mhz", "throttle_bits",
              "energy_mj")


def throttle_reasons(bits: int) -> list[str]:
    return [name for bit, name in THROTTLE_BITS.items() if bits & bit]


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
    """NVML clock-event reason bitmask (see THROTTLE_BITS)."""
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
    """Live GPUs through NVML (``pynvml`` from nvidia-ml-py, or any module with its API)."""

    def __init__(self, nvml: ModuleType) -> None:
        self.nvml = nvml
        nvml.nvmlInit()
        self.handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]
        self.names = [self._read(lambda h=h: nvml.nvmlDeviceGetName(h)) for h in self.handles]

    def describe(self) -> dict[str, Any]:
        names = [n.decode() if isinstance(n, bytes) else n for n in self.names]
        return {"available": True, "devices": names}

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
                throttle_bits=self._read(lambda h=handle: nvml.nvmlDeviceGetCurrentClocksThrottleReasons(h)),
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


def open_gpu_source(nvml: ModuleType | None = None) -> GpuSource:
    """NVML when it answers, otherwise a source that says why there are no GPUs."""
    try:
        nvml = nvml or gpus.load_nvml()
    except ImportError:
        return NoGpuSource("nvidia-ml-py (pynvml) is not installed")
    try:
        return NvmlGpuSource(nvml)
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

    cpu_busy_jiffies: int
    """user+nice+system+irq+softirq+steal."""
    cpu_iowait_jiffies: int
    """Time waiting for I/O."""
    cpu_total_jiffies: int
    """All time."""
    memory_used_bytes: int | None
    """MemTotal - MemAvailable."""
    disk_read_sectors: int | None
    """Sectors read from the dataset device."""
    disk_io_ms: int | None
    """Milliseconds the dataset device was busy."""


class HostProbe:
    """Reads /proc for CPU, memory and the dataset device's counters."""

    def __init__(self, disk: str | None, proc: Path = Path("/proc")) -> None:
        self.disk = disk
        self.proc = proc

    def read(self) -> HostSample:
        cpu = [int(x) for x in (self.proc / "stat").read_text().splitlines()[0].split()[1:]]
        user, nice, system, idle, iowait, irq, softirq, steal = (cpu + [0] * 8)[:8]
        memory = sysinfo.meminfo(self.proc / "meminfo")
        used = (memory["MemTotal"] - memory["MemAvailable"]) * 1024 if "MemAvailable" in memory else None
        sectors, io_ms = self._disk()
        return HostSample(
            cpu_busy_jiffies=user + nice + system + irq + softirq + steal,
            cpu_iowait_jiffies=iowait,
            cpu_total_jiffies=user + nice + system + idle + iowait + irq + softirq + steal,
            memory_used_bytes=used,
            disk_read_sectors=sectors,
            disk_io_ms=io_ms,
        )

    def _disk(self) -> tuple[int | None, int | None]:
        if self.disk is None:
            return None, None
        for line in (self.proc / "diskstats").read_text().splitlines():
            fields = line.split()
            if len(fields) >= 13 and fields[2] == self.disk:
                return int(fields[5]), int(fields[12])
        return None, None


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
        gpu_source: GpuSource | None = None,
        host_probe: HostProbe | None = None,
    ) -> None:
        if not interval_s > 0:
            raise ValueError(f"interval_s must be positive, got {interval_s}")
        self.path = path
        self.data_dir = data_dir
        self.interval_s = interval_s
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
            self._gpu_source = open_gpu_source()
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
        columns.cpu_pct.append(_share(host.cpu_busy_jiffies, host.cpu_total_jiffies, previous, "cpu_busy_jiffies"))
        columns.iowait_pct.append(_share(host.cpu_iowait_jiffies, host.cpu_total_jiffies, previous,
                                         "cpu_iowait_jiffies"))
        read_before = previous.disk_read_sectors if previous else None
        io_before = previous.disk_io_ms if previous else None
        columns.disk_read_bytes_per_s.append(_rate(host.disk_read_sectors, read_before, elapsed, SECTOR_BYTES))
        busy = _rate(host.disk_io_ms, io_before, elapsed, 0.1)  # ms busy per s -> percent
        columns.disk_busy_pct.append(min(busy, 100.0) if busy is not None else None)
        self._previous, self._previous_t = host, now
        while len(columns.gpus) < len(gpus):
            columns.gpus.append({name: [None] * (len(columns.t_ms) - 1) for name in GPU_FIELDS})
        for index, gpu in enumerate(gpus):
            for name in GPU_FIELDS:
                columns.gpus[index][name].append(getattr(gpu, name))


def _share(value: int, total: int, previous: HostSample | None, name: str) -> float | None:
    if previous is None:
        return None
    spent = total - previous.cpu_total_jiffies
    return round(100.0 * (value - getattr(previous, name)) / spent, 2) if spent > 0 else None


def _rate(value: int | None, before: int | None, elapsed: float | None, scale: float) -> float | None:
    if value is None or before is None or not elapsed:
        return None
    return round((value - before) * scale / elapsed, 2)


def load_series(path: Path) -> dict[str, Any]:
    series = json.loads(path.read_text())
    if series.get("version") != SERIES_VERSION:
        raise ValueError(f"{path}: telemetry version {series.get('version')!r}, expected {SERIES_VERSION}")
    return series


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
