"""Hardware telemetry during one seed: a sampler thread and the series it stores.

    with TelemetrySampler(seed_paths.telemetry, data_dir):   # 1 Hz by default
        ... run the seed ...
    series = load_series(seed_paths.telemetry)
    energy = energy_to_train(series, record.run_start_ms, record.run_stop_ms)   # telemetry_summary

The sampler reads the run's GPUs through a `GpuSource` (`gpu_source`: NVML live, only the GPUs the
run was given; `gpu_trace`: a recorded trace in tests) and the host through `host_probe.HostProbe`
(CPU, memory, the dataset's block device). The series is stored column-wise (one list per quantity)
with Unix-epoch millisecond timestamps, the clock MLLOG uses, so run_start and run_stop times from
the log cut it directly. What the series tells (energy, throttling, bottlenecks) is
`telemetry_summary`'s; the throttle reasons' names are `throttle`'s.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.errors import RecordError
from orchestrator.insight.gpu_source import GPU_FIELDS, GpuSource, open_gpu_source
from orchestrator.insight.host_probe import HostProbe, HostSample, dataset_disk
from orchestrator.insight.unavailable import unavailable
from orchestrator.results import atomic
from orchestrator.results.series import SERIES_VERSION


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
    from orchestrator.results.reading import read_record
    from orchestrator.results.series import TelemetrySeries

    series = read_record(path, TelemetrySeries)
    if series is None:
        raise RecordError(f"{path}: missing")
    return series.model_dump(mode="python")
