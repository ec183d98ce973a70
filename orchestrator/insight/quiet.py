"""Was the host quiet while a seed ran? Its telemetry judged: quiet, disturbed (naming each cause and
its share of the seed's time) or unknown (and why).

A seed's time-to-train measures the setup only when nothing else competed for its host: the
thresholds below say when something did. Each is checked on every sample between run_start and
run_stop; a cause counts when it passed its threshold in at least `DISTURBED_SHARE` of them.

What is sampled (`telemetry`), and why each matters:

- CPU steal: on a VM, the share of its CPU time the hypervisor gave to other guests. Cloud hosts
  are shared; a busy neighbour slows every thread of the seed.
- Other processes' CPU: the share of the host's CPU time used by processes that are not the seed's
  (`own_processes`: mltrain's tree and the run's marked container processes). Other jobs landing on
  a node take cores, caches and memory bandwidth from the data loader and the training loop.
- Memory pressure: the share of time in which some task stalled on memory (the kernel's pressure
  stall information, ``/proc/pressure/memory``; absent on kernels without PSI, and said so).
- Other compute processes on the run's GPUs (NVML): another job sharing the GPU.
- GPU throttling: clocks held down by thermal or hardware slowdown or a power brake.
- The load average is recorded and shown, but never decides: it is a one-minute moving average,
  so it lags a minute behind (a neighbour that stopped still shows), and it counts the seed's own
  threads; the processes' CPU, sampled each second, says the same thing without either fault.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from orchestrator import text
from orchestrator.insight.telemetry import NodeSeries
from orchestrator.insight.telemetry_summary import as_array
from orchestrator.insight.throttle import CLOCKS_EVENT_REASONS, throttle_reasons
from orchestrator.results.records import HostCause, QuietHost
from orchestrator.results.series import HOST_EVIDENCE_COLUMNS

STEAL_PCT = 5.0
"""A sample is disturbed by steal at 5% of the CPU time or more: an uncontended cloud VM reports
0-1%, and providers' own guidance reads sustained steal above 5-10% as a noisy neighbour."""
OTHER_CPU_PCT = 10.0
"""A sample is disturbed by other work when processes outside the seed's tree use 10% of the host's
CPU time or more: the host's own daemons (sshd, journald, kernel threads, a monitoring agent) stay
within a few percent; 10% is a fifth of a core on a 2-core host, several cores on a GPU node."""
MEMORY_PRESSURE_PCT = 5.0
"""A sample is disturbed by memory pressure when some task stalled on memory for 5% of it or more
(PSI's "some"): a host with memory to spare shows 0; reclaim and swapping show as stalls."""
GPU_OTHER_PROCESSES = 1
"""A sample is disturbed when any of the run's GPUs runs a compute process that is not the seed's."""
GPU_THROTTLING = frozenset({"hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown"})
"""Clocks-event reasons that disturb a seed: the node's heat or hardware held its clocks down. Not
among them: gpu_idle (no work), sw_power_cap (a busy GPU holding its power limit is how the
hardware runs: it is the setup's speed, shown, not a disturbance), applications_clocks_setting and
display_clock_setting (configuration), sync_boost (GPUs of one job kept in step)."""
DISTURBED_SHARE = 0.10
"""A cause counts when it passed its threshold in at least 10% of the seed's samples: a cron job's
few seconds in a minute-long seed does not, a neighbour running through it does."""
MIN_SAMPLES = 3
"""Fewer samples in the seed's window than this (a seed shorter than ~3 s at 1 Hz) judge nothing."""


def judge(series: dict[str, Any] | None, start_ms: float | None, stop_ms: float | None) -> QuietHost:
    """The verdict on one seed's host, from its telemetry series between run_start and run_stop."""
    if series is None:
        return unknown("no telemetry was sampled")
    host = series.get("host") or {}
    if not any(host.get(name) is not None for name in HOST_EVIDENCE_COLUMNS):
        return unknown("its telemetry predates the quiet-host evidence (steal, other processes, pressure)")
    if start_ms is None or stop_ms is None or stop_ms <= start_ms:
        return unknown("the log has no run_start and run_stop to cut the telemetry with")
    t = np.asarray(host.get("t_ms") or [], dtype=float)
    window = (t >= start_ms) & (t <= stop_ms)
    samples = int(window.sum())
    if samples < MIN_SAMPLES:
        return unknown(f"only {samples} telemetry sample(s) between run_start and run_stop", samples)
    notes = dict(series.get("evidence_notes") or {})
    measured: dict[str, float | None] = {}
    not_measured: dict[str, str] = {}
    causes: list[HostCause] = []

    def column(name: str) -> np.ndarray | None:
        values = host.get(name)
        if values is None:
            not_measured[name] = "not sampled"
            return None
        cut = as_array(values)[window]
        if np.isnan(cut).all():
            not_measured[name] = notes.get(_NOTE.get(name, name), "no value in the seed's samples")
            return None
        measured[name] = round(float(np.nanmean(cut)), 2)
        return cut

    def cause(name: str, threshold: float, kind: str, sentence: Callable[[str, str], str]) -> np.ndarray | None:
        """Column ``name``, adding cause ``kind`` where it passed ``threshold`` in enough samples;
        ``sentence`` is told the share of the seed's time and the column's mean, both as shares."""
        values = column(name)
        if values is not None:
            share, mean = _share(values >= threshold, values), measured[name]
            if share >= DISTURBED_SHARE and mean is not None:
                causes.append(HostCause(cause=kind, share=share, mean=mean,
                                        sentence=sentence(text.share(share), text.share(mean / 100))))
        return values

    other = cause("other_cpu_pct", OTHER_CPU_PCT, "other_processes", lambda share, mean: (
        f"the host ran other work in {share} of the seed's time (other processes used {mean} of its CPU on average)"))
    steal = cause("steal_pct", STEAL_PCT, "cpu_steal", lambda share, mean: (
        f"the hypervisor gave this VM's CPUs to others (steal of {text.share(STEAL_PCT / 100)} or more)"
        f" in {share} of the seed's time ({mean} on average)"))
    cause("memory_pressure_pct", MEMORY_PRESSURE_PCT, "memory_pressure", lambda share, mean: (
        f"tasks stalled on memory in {share} of the seed's time ({mean} of it on average)"))
    column("load_1m")
    causes += _gpu_causes(series.get("gpus") or [], window, measured, not_measured)
    if causes:
        return QuietHost(verdict="disturbed", samples=samples, causes=tuple(causes), measured=measured,
                         not_measured=not_measured, reason="disturbed: " + "; ".join(c.sentence for c in causes))
    if other is None and steal is None:
        return QuietHost(verdict="unknown", samples=samples, measured=measured, not_measured=not_measured,
                         reason="not judged: the host's CPU could not be told apart from the seed's: "
                                + (not_measured.get("other_cpu_pct") or "not sampled"))
    return QuietHost(verdict="quiet", samples=samples, measured=measured, not_measured=not_measured,
                     reason=_quiet_reason(measured, not_measured, samples))


def node_evidence(nodes: Mapping[str, NodeSeries], start_ms: float | None, stop_ms: float | None,
                  ) -> dict[str, QuietHost]:
    """Each node's verdict from its own series (`telemetry.load_node_series`: the seed's
    `node_telemetry`, written by `insight.node_telemetry`): a node without one is not judged, and says why."""
    return {node: judge(n.series, start_ms, stop_ms) if n.series is not None else unknown(n.missing)
            for node, n in nodes.items()}


def judge_nodes(judged: dict[str, QuietHost]) -> QuietHost:
    """A seed's verdict from each node's own (a seed a batch system ran: each node sampled itself,
    `node_telemetry`): disturbed when any node was, naming it and each cause; quiet only when every
    node was; else unknown, naming the nodes not judged. ``measured`` holds each signal's worst node."""
    if not judged:
        return unknown("no node's telemetry was written")
    causes = tuple(c.model_copy(update={"node": node, "sentence": f"node {node}: {c.sentence}"})
                   for node, verdict in sorted(judged.items()) for c in verdict.causes)
    samples = min(v.samples for v in judged.values())
    measured: dict[str, float | None] = {}
    for verdict in judged.values():
        for name, value in verdict.measured.items():
            if value is not None:
                measured[name] = max(value, measured.get(name) or value)
    not_measured = {f"{node}: {name}": why
                    for node, v in sorted(judged.items()) for name, why in v.not_measured.items()}
    if causes:
        return QuietHost(verdict="disturbed", samples=samples, causes=causes, measured=measured,
                         not_measured=not_measured, reason="disturbed: " + "; ".join(c.sentence for c in causes))
    unjudged = {node: v for node, v in sorted(judged.items()) if v.verdict != "quiet"}
    if unjudged:
        return QuietHost(verdict="unknown", samples=samples, measured=measured, not_measured=not_measured,
                         reason="not judged on every node: " + "; ".join(
                             f"node {node}: {v.reason.removeprefix('not judged: ')}" for node, v in unjudged.items()))
    return QuietHost(verdict="quiet", samples=samples, measured=measured, not_measured=not_measured,
                     reason=f"quiet on every node ({len(judged)}): " + "; ".join(
                         f"node {node}: {v.reason.removeprefix('quiet: ')}" for node, v in sorted(judged.items())))


_NOTE = {"memory_pressure_pct": "memory_pressure", "other_cpu_pct": "own_processes"}
"""The series' evidence note that explains an empty column."""


def _gpu_causes(gpus: Sequence[dict[str, Any]], window: np.ndarray, measured: dict[str, float | None],
                not_measured: dict[str, str]) -> list[HostCause]:
    if not gpus:
        return []
    causes = []
    counts = [as_array(g["other_processes"])[window] for g in gpus if g.get("other_processes") is not None]
    if counts and not all(np.isnan(c).all() for c in counts):
        per_sample = np.nansum(np.vstack(counts), axis=0)
        known = ~np.all(np.isnan(np.vstack(counts)), axis=0)
        measured["gpu_other_processes_max"] = float(per_sample[known].max())
        share = float((per_sample[known] >= GPU_OTHER_PROCESSES).mean())
        if share >= DISTURBED_SHARE:
            causes.append(HostCause(cause="gpu_processes", share=share, mean=round(float(per_sample[known].mean()), 2),
                                    sentence=(f"another process ran on the run's GPUs in {text.share(share)} of the"
                                              f" seed's time (up to {int(per_sample[known].max())} at once)")))
    else:
        not_measured["gpu_other_processes"] = "the driver did not list the GPUs' compute processes"
    positions = np.flatnonzero(window)
    seen: dict[str, int] = {}
    throttled = 0  # samples in which any GPU's clocks were held down by a reason in GPU_THROTTLING
    for position in positions:
        active: set[str] = set()
        for gpu in gpus:
            bits = gpu["throttle_bits"][position]
            if bits is not None:
                active.update(r for r in throttle_reasons(int(bits)) if r != CLOCKS_EVENT_REASONS["GpuIdle"])
        for reason in active:
            seen[reason] = seen.get(reason, 0) + 1
        throttled += not active.isdisjoint(GPU_THROTTLING)
    for reason, count in sorted(seen.items()):
        measured[f"throttle_{reason}"] = round(count / len(positions), 4)
    slowed = {r: n / len(positions) for r, n in seen.items() if r in GPU_THROTTLING}
    if slowed:
        any_share = throttled / len(positions)
        if any_share >= DISTURBED_SHARE:
            names = ", ".join(sorted(slowed))
            causes.append(HostCause(cause="gpu_throttle", share=any_share, sentence=(
                f"the GPUs' clocks were held down ({names}) in {text.share(any_share)} of the seed's time")))
    return causes


def _quiet_reason(measured: dict[str, float | None], not_measured: dict[str, str], samples: int) -> str:
    parts = []
    if measured.get("other_cpu_pct") is not None:
        parts.append(f"other processes {text.share(measured['other_cpu_pct'] / 100)} of the host's CPU")
    if measured.get("steal_pct") is not None:
        parts.append(f"steal {text.share(measured['steal_pct'] / 100)}")
    if measured.get("memory_pressure_pct") is not None:
        parts.append(f"memory stalls {text.share(measured['memory_pressure_pct'] / 100)}")
    if measured.get("gpu_other_processes_max") is not None:
        parts.append("no other process on the run's GPUs")
    if measured.get("load_1m") is not None:
        parts.append(f"load average {text.number(measured['load_1m'])}")
    missing = f"; not measured: {', '.join(sorted(not_measured))}" if not_measured else ""
    return f"quiet: {', '.join(parts)} on average over {samples} samples{missing}"


def unknown(why: str, samples: int = 0) -> QuietHost:
    return QuietHost(verdict="unknown", reason=f"not judged: {why}", samples=samples)


def _share(over: np.ndarray, values: np.ndarray) -> float:
    """Share of the samples with a value in which ``over`` holds."""
    known = ~np.isnan(values)
    return round(float(over[known].mean()), 4) if known.any() else 0.0
