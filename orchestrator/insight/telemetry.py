"""Hardware telemetry during one seed: a sampler thread and the series it stores.

    with TelemetrySampler(seed_paths.telemetry, data_dir):   # 1 Hz by default
        ... run the seed ...
    series = load_series(seed_paths.telemetry)
    energy = energy_to_train(series, record.run_start_ms, record.run_stop_ms)   # telemetry_summary

The sampler reads the run's GPUs through a `GpuSource` (`gpu_source`: NVML live, only the GPUs the
run was given; `gpu_trace`: a recorded trace in tests) and the host through `host_probe.HostProbe`
(CPU, memory, the dataset's block device), and tells the seed's own processes from the rest of the
host (`own_processes`): the quiet-host evidence (CPU steal, other processes' CPU, load average,
memory pressure, other compute processes on the run's GPUs) that `quiet` judges. The series is
stored column-wise (one list per quantity) with Unix-epoch millisecond timestamps, the clock MLLOG
uses, so run_start and run_stop times from the log cut it directly. What the series tells (energy,
throttling, bottlenecks) is `telemetry_summary`'s; the throttle reasons' names are `throttle`'s.
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.config.reading import TELEMETRY_BYTES
from orchestrator.errors import RecordError
from orchestrator.insight.gpu_source import GPU_FIELDS, GpuSample, GpuSource, open_gpu_source
from orchestrator.insight.host_probe import HostProbe, HostSample, dataset_disk
from orchestrator.insight.own_processes import OwnProcesses
from orchestrator.insight.unavailable import unavailable
from orchestrator.results import atomic
from orchestrator.results.series import GPU_EVIDENCE_COLUMNS, SERIES_VERSION


@dataclass
class _Columns:
    """The series being built (one list per quantity)."""

    t_ms: list[int] = field(default_factory=list)
    cpu_pct: list[float | None] = field(default_factory=list)
    iowait_pct: list[float | None] = field(default_factory=list)
    memory_used_bytes: list[int | None] = field(default_factory=list)
    disk_read_bytes_per_s: list[float | None] = field(default_factory=list)
    disk_busy_pct: list[float | None] = field(default_factory=list)
    steal_pct: list[float | None] = field(default_factory=list)
    other_cpu_pct: list[float | None] = field(default_factory=list)
    load_1m: list[float | None] = field(default_factory=list)
    memory_pressure_pct: list[float | None] = field(default_factory=list)
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
        mark: str | None = None,
        own_processes: OwnProcesses | None = None,
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
        self._own = own_processes or OwnProcesses(mark=mark)
        """The seed's processes: mltrain's tree, and those carrying the run's mark (``mark``: its id)."""
        self._own_note = ""
        self._disk_note = ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._columns = _Columns()
        self._previous: HostSample | None = None
        self._previous_t: float | None = None
        self._errors: list[str] = []
        self.written: dict[str, Any] | None = None
        """The series `stop` wrote."""

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
        self.written = series
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
        notes = {"own_processes": self._own_note or self._own.describe()}
        if self._host_probe.pressure_note:
            notes["memory_pressure"] = self._host_probe.pressure_note
        return {
            "version": SERIES_VERSION,
            "interval_s": self.interval_s,
            "gpu_source": self._gpu_source.describe(),
            "dataset_device": self._host_probe.disk or unavailable(self._disk_note),
            "host": columns,
            "gpus": gpus,
            "sampling_errors": self._errors[:20],
            "host_cpus": os.cpu_count(),
            "evidence_notes": notes,
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
        own_s, own_pids = self._own_step()
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
        columns.steal_pct.append(_share(host.cpu_steal_s, host.cpu_total_s, previous, "cpu_steal_s"))
        columns.other_cpu_pct.append(_others(host, previous, own_s))
        columns.load_1m.append(round(host.load_1m, 2) if host.load_1m is not None else None)
        stalled = _rate(host.memory_stall_us, previous.memory_stall_us if previous else None, elapsed, 1e-4)
        columns.memory_pressure_pct.append(min(max(stalled, 0.0), 100.0) if stalled is not None else None)
        self._previous, self._previous_t = host, now
        while len(columns.gpus) < len(gpus):
            columns.gpus.append({name: [None] * (len(columns.t_ms) - 1)
                                 for name in (*GPU_FIELDS, *GPU_EVIDENCE_COLUMNS)})
        for index, gpu in enumerate(gpus):
            for name in GPU_FIELDS:
                columns.gpus[index][name].append(getattr(gpu, name))
            columns.gpus[index]["other_processes"].append(_other_processes(gpu, own_pids))

    def _own_step(self) -> tuple[float | None, frozenset[int] | None]:
        """The seed's processes' CPU seconds since the last sample, and their PIDs (None, None when
        they cannot be told apart, and why in the series' notes)."""
        try:
            return self._own.step()
        except Exception as exc:  # noqa: BLE001 - best effort, as every reading here
            self._own_note = f"the seed's processes could not be told apart: {type(exc).__name__}: {exc}"
            return None, None


def _others(host: HostSample, previous: HostSample | None, own_s: float | None) -> float | None:
    """Percent of the host's CPU time that processes other than the seed's ran in the interval."""
    if previous is None or own_s is None:
        return None
    spent = host.cpu_total_s - previous.cpu_total_s
    if spent <= 0:
        return None
    others = host.cpu_process_s - previous.cpu_process_s - own_s
    return round(min(max(100.0 * others / spent, 0.0), 100.0), 2)


def _other_processes(gpu: GpuSample, own: frozenset[int] | None) -> int | None:
    """Compute processes on the GPU that are not the seed's (None when either is unknown)."""
    if gpu.compute_pids is None or own is None:
        return None
    return sum(1 for pid in gpu.compute_pids if pid not in own)


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
    from orchestrator.results.record_reader import read_record
    from orchestrator.results.series import TelemetrySeries

    series = read_record(path, TelemetrySeries, max_bytes=TELEMETRY_BYTES)
    if series is None:
        raise RecordError(f"{path}: missing")
    return series.model_dump(mode="python")


@dataclass(frozen=True)
class NodeSeries:
    """One node's own series of a seed a batch system ran (`node_telemetry`), or why there is none."""

    series: dict[str, Any] | None
    missing: str = ""
    """Why there is no series ('' where there is one)."""


def load_node_series(folder: Path, nodes: tuple[str, ...]) -> dict[str, NodeSeries]:
    """Each node's series from ``folder`` (the seed's `node_telemetry`, one ``<node>.json`` each),
    ``nodes`` the nodes the seed ran on as far as its launchers said: one of them that wrote none,
    or whose file cannot be read, says why. Empty: no node sampled itself (a seed run here)."""
    found = {node: NodeSeries(None, "the node wrote no series (its task did not end on its own)") for node in nodes}
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            found[path.stem] = NodeSeries(load_series(path))
        except RecordError as exc:
            found[path.stem] = NodeSeries(None, f"its series cannot be read: {exc}")
    return found
