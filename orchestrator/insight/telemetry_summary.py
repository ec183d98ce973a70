"""What one seed's telemetry series says, between run_start and run_stop: energy, power, throttling,
utilisation and a bottleneck hint. Pure functions over the series `telemetry.TelemetrySampler` writes.
Every figure is the system's own that ran the seed: the host's for a seed run here, each node's (from
its own series, named by the node) for a seed a batch system ran across nodes; never the submitting
host's for a seed that ran elsewhere.

Energy-to-train is the GPUs' board power integrated over [run_start, run_stop] (trapezoids,
the series cut by linear interpolation at both ends). When every GPU reports NVML's total-energy
counter at both ends, the counter's difference is used instead: it is measured by the board,
not sampled at 1 Hz. A seed a batch system ran across nodes sampled each node on the node itself
(`node_telemetry`): its energy is the sum of its nodes', each from the node's own series over the
same window, and unknown (naming the node) when any node's is; the submitting host's series is not
the seed's then.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from orchestrator.insight.telemetry import NodeSeries
from orchestrator.insight.throttle import REAL_THROTTLING, throttle_reasons
from orchestrator.results.records import SeedEnergy

TRAPEZOID = getattr(np, "trapezoid", None) or np.trapz
"""The trapezoidal rule, numpy's (`trapezoid` from numpy 2, `trapz` before): the arithmetic of
scipy.integrate.trapezoid, without importing scipy.integrate (and scipy.optimize behind it: 0.4 s of
every `report`)."""
MIN_COVERAGE = 0.9
"""Below this share of [run_start, run_stop] covered by samples, energy is not reported."""
IDLE_GPU_PCT = 50.0
SATURATED_PCT = 90.0
BOTTLENECK_SHARE = 0.25
"""A bottleneck is hinted when the GPUs idle while CPU or disk saturate in this share of samples."""


@dataclass(frozen=True, kw_only=True)
class Energy:
    """Energy-to-train of one seed, or why it is unknown."""

    joules: float | None
    """Energy of all GPUs between run_start and run_stop; None when unknown."""
    method: str
    """'energy counter', 'integrated power' or why there is no value (a seed across nodes: each
    node's, or which node's is unknown and why)."""
    mean_power_w: float | None
    """Mean total GPU power over the window (of every node)."""
    peak_power_w: float | None
    """Highest total GPU power sampled in the window (of every node: their series summed, each
    interpolated at the others' sample times)."""
    coverage: float
    """Share of the window covered by samples (0..1)."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.coverage <= 1.0:
            raise ValueError(f"coverage {self.coverage} outside 0..1")

    @property
    def kwh(self) -> float | None:
        return self.joules / 3.6e6 if self.joules is not None else None


def energy_to_train(series: dict[str, Any] | None, start_ms: float, stop_ms: float,
                    nodes: Mapping[str, NodeSeries] | None = None) -> Energy:
    """GPU energy between run_start and run_stop (Unix ms, as MLLOG logs them), from ``series``; for
    a seed whose nodes sampled themselves (``nodes``: `telemetry.load_node_series`), the sum over its
    nodes, each from its own series, ``series`` (the submitting host's) not counted: unknown where any
    node's is, naming it, never a partial sum."""
    if stop_ms <= start_ms:
        raise ValueError(f"run_stop {stop_ms} is not after run_start {start_ms}")
    if nodes:
        return _over_nodes(nodes, start_ms, stop_ms)
    if series is None:
        raise ValueError("no series to cut")
    return _of_series(series, start_ms, stop_ms)


def _over_nodes(nodes: Mapping[str, NodeSeries], start_ms: float, stop_ms: float) -> Energy:
    each = {node: _of_series(n.series, start_ms, stop_ms) if n.series is not None else None
            for node, n in sorted(nodes.items())}
    coverage = min(e.coverage if e is not None else 0.0 for e in each.values())
    present = [n.series for n in nodes.values() if n.series is not None]
    peak = _peak_of_sum(present, start_ms, stop_ms) if len(present) == len(nodes) else None
    unknown = [f"node {node}: {e.method if e is not None else nodes[node].missing}"
               for node, e in each.items() if e is None or e.joules is None]
    count = f"{len(each)} nodes" if len(each) > 1 else "1 node"  # a one-node seed a batch system ran
    if unknown:
        return Energy(joules=None, method=f"unknown on {len(unknown)} of {count}: " + "; ".join(unknown),
                      mean_power_w=None, peak_power_w=peak, coverage=coverage)
    joules = sum(e.joules for e in each.values() if e is not None and e.joules is not None)
    methods = {e.method for e in each.values() if e is not None}
    how = (f"{methods.pop()}, summed over {count}" if len(methods) == 1 else
           f"summed over {count}: " + "; ".join(f"node {node}: {e.method}" for node, e in each.items() if e))
    return Energy(joules=joules, method=how, mean_power_w=joules / ((stop_ms - start_ms) / 1000), peak_power_w=peak,
                  coverage=coverage)


def _peak_of_sum(every: list[dict[str, Any]], start_ms: float, stop_ms: float) -> float | None:
    """Highest total GPU power of several nodes in the window: each node's sampled power interpolated
    at every node's sample times there (None where a node reported none)."""
    curves = []
    for series in every:
        t, gpus = np.asarray(series["host"]["t_ms"], dtype=float), series.get("gpus", [])
        power = _total(gpus, "power_w") if gpus else np.full(t.shape, np.nan)
        known = ~np.isnan(power)
        if not known.any():
            return None
        curves.append((t[known], power[known]))
    lo, hi = max(start_ms, *(t[0] for t, _ in curves)), min(stop_ms, *(t[-1] for t, _ in curves))
    grid = np.unique(np.concatenate([t[(t >= lo) & (t <= hi)] for t, _ in curves]))
    if grid.size == 0:
        return None
    return float(np.sum([np.interp(grid, t, p) for t, p in curves], axis=0).max())


def _of_series(series: dict[str, Any], start_ms: float, stop_ms: float) -> Energy:
    """One series' GPU energy in the window (a host's, or one node's)."""
    t = np.asarray(series["host"]["t_ms"], dtype=float)
    gpus = series.get("gpus", [])
    coverage = _coverage(t, start_ms, stop_ms)
    if not gpus:
        reason = series.get("gpu_source", {}).get("reason", "no GPU in the series")
        return Energy(joules=None, method=f"no GPU power: {reason}", mean_power_w=None, peak_power_w=None,
                      coverage=coverage)
    power = _total(gpus, "power_w")
    window = (t >= start_ms) & (t <= stop_ms)
    peak = float(np.nanmax(power[window])) if window.any() and not np.isnan(power[window]).all() else None
    if coverage < MIN_COVERAGE:
        return Energy(joules=None, method=f"samples cover only {coverage:.0%} of the run", mean_power_w=None,
                      peak_power_w=peak, coverage=coverage)
    seconds = (stop_ms - start_ms) / 1000
    counter = _total(gpus, "energy_mj")
    counted = _interpolate(t, counter, [start_ms, stop_ms])
    if not np.isnan(counted).any() and counted[1] >= counted[0]:
        joules = float(counted[1] - counted[0]) / 1000
        return Energy(joules=joules, method="energy counter", mean_power_w=joules / seconds, peak_power_w=peak,
                      coverage=coverage)
    known = ~np.isnan(power)
    if known.sum() < 2:
        return Energy(joules=None, method="GPU power not reported", mean_power_w=None, peak_power_w=None,
                      coverage=coverage)
    cut_t, cut_p = _cut(t[known], power[known], start_ms, stop_ms)
    joules = float(TRAPEZOID(cut_p, cut_t / 1000))
    return Energy(joules=joules, method="integrated power", mean_power_w=joules / seconds, peak_power_w=peak,
                  coverage=coverage)


def seed_energy(series: dict[str, Any] | None, start_ms: float | None, stop_ms: float | None,
                nodes: Mapping[str, NodeSeries] | None = None) -> SeedEnergy | None:
    """What a seed's record keeps of `energy_to_train` (what `summarize` finds, from the same series,
    its nodes' where they sampled themselves); None where there is no series or no window to cut it with."""
    if (series is None and not nodes) or start_ms is None or stop_ms is None or stop_ms <= start_ms:
        return None
    energy = energy_to_train(series, start_ms, stop_ms, nodes)
    if energy.joules is not None and not math.isfinite(energy.joules):
        return SeedEnergy(joules=None, method=f"not a finite energy ({energy.joules})")
    return SeedEnergy(joules=energy.joules, method=energy.method)


HERE = ""
"""The key of `SeedTelemetry.systems` for a seed run on the host that sampled it (no batch system's nodes)."""


@dataclass(frozen=True, kw_only=True)
class Figures:
    """What one system's own series says of a seed's window: the host that ran it, or one node of it.
    A figure the series lacks is None (unknown on that system)."""

    gpu_util_mean_pct: float | None
    """Mean over the system's GPUs and samples in the window."""
    gpu_memory_peak_bytes: int | None
    """Highest memory use of any of its GPUs."""
    temperature_peak_c: float | None
    """Its hottest GPU sample."""
    throttling: dict[str, float] | None
    """Real throttle reason -> share of samples (any of its GPUs) in which it was active; None where its
    GPUs reported no throttle reasons in the window."""
    cpu_mean_pct: float | None
    """Mean CPU busy share of the system."""
    memory_peak_bytes: int | None
    """Highest memory use of the system."""
    disk_read_mean_bytes_per_s: float | None
    """Mean read rate of its dataset device."""
    bottleneck: str
    """A hint: which resource saturated while the GPUs waited, or 'none seen'; 'unknown: why' where
    the system has no series."""
    missing: str = ""
    """Why the system has no series ('' where it has one; every figure is unknown then)."""


@dataclass(frozen=True, kw_only=True)
class SeedTelemetry:
    """One seed's telemetry, reduced to what a comparison shows."""

    energy: Energy
    """Energy-to-train and power."""
    systems: dict[str, Figures]
    """The figures of each system that ran the seed, each from its own series: {HERE: the host's} for a
    seed run here; for a seed a batch system ran (its nodes sampled themselves), each node's by its
    name, the submitting host's never among them."""

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["energy"]["kwh"] = self.energy.kwh
        return data


def summarize(series: dict[str, Any] | None, start_ms: float, stop_ms: float,
              nodes: Mapping[str, NodeSeries] | None = None) -> SeedTelemetry:
    """The seed's telemetry in the window: from ``nodes`` where they sampled themselves (each node's
    figures from its own series, its energy and power the sum of theirs: `energy_to_train`), else
    from ``series``, the host's that ran it."""
    if nodes:
        systems = {node: figures(n.series, start_ms, stop_ms) if n.series is not None else _unknown(n.missing)
                   for node, n in sorted(nodes.items())}
    elif series is None:
        raise ValueError("no series to summarize")
    else:
        systems = {HERE: figures(series, start_ms, stop_ms)}
    return SeedTelemetry(energy=energy_to_train(series, start_ms, stop_ms, nodes), systems=systems)


def figures(series: dict[str, Any], start_ms: float, stop_ms: float) -> Figures:
    """One system's figures in the window, from its own series."""
    t = np.asarray(series["host"]["t_ms"], dtype=float)
    window = (t >= start_ms) & (t <= stop_ms)
    host = {name: as_array(series["host"][name])[window] for name in
            ("cpu_pct", "iowait_pct", "memory_used_bytes", "disk_read_bytes_per_s", "disk_busy_pct")}
    gpus = series.get("gpus", [])
    util = np.vstack([as_array(g["util_pct"])[window] for g in gpus]) if gpus else np.empty((0, int(window.sum())))
    return Figures(
        gpu_util_mean_pct=_mean(util),
        gpu_memory_peak_bytes=_peak_int([as_array(g["memory_used_bytes"])[window] for g in gpus]),
        temperature_peak_c=_peak([as_array(g["temperature_c"])[window] for g in gpus]),
        throttling=_throttling(gpus, window),
        cpu_mean_pct=_mean(host["cpu_pct"]),
        memory_peak_bytes=_peak_int([host["memory_used_bytes"]]),
        disk_read_mean_bytes_per_s=_mean(host["disk_read_bytes_per_s"]),
        bottleneck=_bottleneck(util, host["cpu_pct"], host["iowait_pct"], host["disk_busy_pct"]),
    )


def _unknown(missing: str) -> Figures:
    """A system without a series: every figure unknown, and why."""
    return Figures(gpu_util_mean_pct=None, gpu_memory_peak_bytes=None, temperature_peak_c=None, throttling=None,
                   cpu_mean_pct=None, memory_peak_bytes=None, disk_read_mean_bytes_per_s=None,
                   bottleneck=f"unknown: {missing}", missing=missing)


def _bottleneck(util: np.ndarray, cpu: np.ndarray, iowait: np.ndarray, disk_busy: np.ndarray) -> str:
    if util.shape[0] == 0:
        mean_cpu = _mean(cpu)
        return "no GPU: host CPU bound" if mean_cpu is not None and mean_cpu >= SATURATED_PCT else "no GPU"
    if util.shape[1] == 0 or np.isnan(util).all():
        return "unknown: no GPU utilisation in the window"
    with np.errstate(invalid="ignore"):
        idle = np.nanmean(util, axis=0) < IDLE_GPU_PCT
        cpu_busy = np.nan_to_num(cpu, nan=0.0) >= SATURATED_PCT
        disk_busy = (np.nan_to_num(disk_busy, nan=0.0) >= SATURATED_PCT) | (
            np.nan_to_num(iowait, nan=0.0) >= 100.0 - SATURATED_PCT)
    shares = {"CPU (data loading / preprocessing)": float((idle & cpu_busy).mean()),
              "dataset storage (I/O)": float((idle & disk_busy).mean())}
    name, share = max(shares.items(), key=lambda item: item[1])
    if share >= BOTTLENECK_SHARE:
        return f"{name}: GPUs idle while it saturated in {share:.0%} of samples"
    if idle.mean() >= BOTTLENECK_SHARE:
        return f"GPUs idle in {idle.mean():.0%} of samples without a saturated CPU or disk (synchronisation?)"
    return "none seen"


def _throttling(gpus: list[dict[str, Any]], window: np.ndarray) -> dict[str, float] | None:
    if not gpus or not window.any():
        return {}
    if all(gpu["throttle_bits"][position] is None for gpu in gpus for position in np.flatnonzero(window)):
        return None
    seen: dict[str, int] = {}
    for position in np.flatnonzero(window):
        active: set[str] = set()
        for gpu in gpus:
            bits = gpu["throttle_bits"][position]
            if bits is not None:
                active.update(r for r in throttle_reasons(int(bits)) if r in REAL_THROTTLING)
        for reason in active:
            seen[reason] = seen.get(reason, 0) + 1
    total = int(window.sum())
    return {reason: round(count / total, 4) for reason, count in sorted(seen.items())}


def as_array(values: list[Any]) -> np.ndarray:
    """A column of a series as floats, NaN where it holds None."""
    return np.array([np.nan if v is None else v for v in values], dtype=float)


def _total(gpus: list[dict[str, Any]], name: str) -> np.ndarray:
    """Sum over GPUs per sample; NaN where any GPU did not report."""
    return np.sum(np.vstack([as_array(g[name]) for g in gpus]), axis=0)


def _coverage(t: np.ndarray, start_ms: float, stop_ms: float) -> float:
    if t.size < 2:
        return 0.0
    covered = min(t[-1], stop_ms) - max(t[0], start_ms)
    return float(max(0.0, min(1.0, covered / (stop_ms - start_ms))))


def _interpolate(t: np.ndarray, values: np.ndarray, at: list[float]) -> np.ndarray:
    known = ~np.isnan(values)
    if known.sum() < 2:
        return np.full(len(at), np.nan)
    tk, vk = t[known], values[known]
    points = np.asarray(at, dtype=float)
    result = np.interp(points, tk, vk)
    result[(points < tk[0]) | (points > tk[-1])] = np.nan
    return result


def _cut(t: np.ndarray, values: np.ndarray, start: float, stop: float) -> tuple[np.ndarray, np.ndarray]:
    """The series restricted to [start, stop], with interpolated points at both ends."""
    lo, hi = max(start, t[0]), min(stop, t[-1])
    inside = (t > lo) & (t < hi)
    cut_t = np.concatenate([[lo], t[inside], [hi]])
    return cut_t, np.interp(cut_t, t, values)


def _mean(values: np.ndarray) -> float | None:
    if values.size == 0 or np.isnan(values).all():
        return None
    return round(float(np.nanmean(values)), 2)


def _peak(columns: list[np.ndarray]) -> float | None:
    values = np.concatenate(columns) if columns else np.empty(0)
    if values.size == 0 or np.isnan(values).all():
        return None
    return float(np.nanmax(values))


def _peak_int(columns: list[np.ndarray]) -> int | None:
    peak = _peak(columns)
    return int(peak) if peak is not None else None
