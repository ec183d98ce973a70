"""Scaling efficiency between runs of one workload on different node counts (`mltrain compare`).

A run's speed is its time per epoch: each converged seed's time-to-train over the epochs it ran,
the median over its seeds (run_start to run_stop, as MLLOG says; the init phase is left out). The
speedup of a run on N nodes over the baseline on B nodes is the baseline's time per epoch over the
run's; ideal is N/B; efficiency is speedup / ideal. A run's nodes are those its seeds' records name
(`RunRecord.placement`); a record without one ran on one node. The usual rules hold: every run is
named with its profile, a smoke profile's figure is said to be one, and a run with a disturbed seed
is said to be so (its figure is not the nodes' alone).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from orchestrator import text
from orchestrator.insight.runs import RunView, view_of
from orchestrator.results.store import Store
from orchestrator.runners.kinds import ACROSS_NODES

SMOKE = "smoke"


@dataclass(frozen=True, kw_only=True)
class RunSpeed:
    run_id: str
    profile: str
    nodes: int
    world_size: int
    ms_per_epoch: float | None
    """Median over converged seeds of time-to-train / epochs run; None: no converged seed."""
    disturbed: int
    """Seeds whose host was judged disturbed."""


@dataclass(frozen=True, kw_only=True)
class Scaling:
    run: RunSpeed
    baseline: RunSpeed
    speedup: float | None
    ideal: float
    efficiency: float | None


def speed_of(view: RunView) -> RunSpeed:
    nodes, world, per_epoch, disturbed = 1, 1, [], 0
    for seed in view.seeds:
        record = seed.record
        if record.placement is not None:
            nodes, world = max(nodes, len(record.placement.nodes)), max(world, record.placement.world_size)
        if record.quiet_host is not None and record.quiet_host.verdict == "disturbed":
            disturbed += 1
        epochs = record.epochs_run or record.epochs_to_target
        if record.converged and record.time_to_train_ms is not None and epochs:
            per_epoch.append(record.time_to_train_ms / epochs)
    return RunSpeed(run_id=view.run_id, profile=str(view.manifest.profile), nodes=nodes, world_size=world,
                    ms_per_epoch=statistics.median(per_epoch) if per_epoch else None, disturbed=disturbed)


def scaling(views: Sequence[RunView]) -> list[Scaling]:
    """Each run on more nodes than the run on the fewest, against it; [] when all ran on as many nodes."""
    speeds = [speed_of(view) for view in views]
    if len({s.nodes for s in speeds}) < 2:
        return []
    baseline = min(speeds, key=lambda s: s.nodes)
    found = []
    for speed in speeds:
        if speed.nodes == baseline.nodes:
            continue
        ideal = speed.nodes / baseline.nodes
        speedup = (baseline.ms_per_epoch / speed.ms_per_epoch
                   if baseline.ms_per_epoch and speed.ms_per_epoch else None)
        found.append(Scaling(run=speed, baseline=baseline, speedup=speedup, ideal=ideal,
                             efficiency=speedup / ideal if speedup is not None else None))
    return found


def sentences(views: Sequence[RunView]) -> list[str]:
    """One line per run on more nodes: its time per epoch, speedup, ideal and scaling efficiency."""
    lines = []
    for s in scaling(views):
        run, base = s.run, s.baseline
        if s.speedup is None:
            lines.append(f"scaling: {run.run_id} ({run.nodes} nodes) against {base.run_id} ({base.nodes} node(s)):"
                         " unknown, a run has no converged seed")
            continue
        line = (f"scaling: {run.run_id} on {run.nodes} nodes (world size {run.world_size}) runs an epoch in "
                f"{text.duration(run.ms_per_epoch)} against {text.duration(base.ms_per_epoch)} on {base.nodes}"
                f" node(s) ({base.run_id}): speedup {s.speedup:.2f}x of an ideal {s.ideal:g}x, scaling"
                f" efficiency {text.percent(s.efficiency)}")
        notes = []
        if SMOKE in (run.profile, base.profile):
            notes.append("a smoke profile: a smoke figure, not a result")
        if run.disturbed or base.disturbed:
            notes.append(f"{run.disturbed + base.disturbed} seed(s) on a disturbed host: not the nodes' figure alone")
        lines.append(line + (f" ({'; '.join(notes)})" if notes else ""))
    return lines


def sentences_for(store: Store, run_ids: Sequence[str], runners: Mapping[str, str | None]) -> list[str]:
    """`sentences` of the stored runs ``run_ids`` (the runs a comparison chose; ``runners``: each one's
    runner, from the index). Runs are opened only where their node counts differ: a run on a runner
    other than Slurm ran on one node, a Slurm run's count is in its manifest (read alone), so a
    comparison of thousands of one-node runs opens none for this."""
    counts = {(store.manifest(run_id).runner_provenance.get("nodes", 1) if runners.get(run_id) in ACROSS_NODES else 1)
              for run_id in run_ids}
    if len(counts) < 2:
        return []
    return sentences([view_of(store.open(run_id)) for run_id in run_ids])
