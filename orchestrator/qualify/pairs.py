"""All-reduce between pairs of a fleet's nodes (the ``nccl_pairs`` check), and which node a slow
pair names.

    pairs = ring(nodes)                 # each node with its two neighbours: n0-n1, n1-n2, ..., n(k-1)-n0
    for batch in rounds(pairs):         # pairs of one round share no node: they run at once
        readings += measure(batch)      # a probe job on each node of each pair (`SlurmPairs`)
    check, findings = judge(readings, declaration, settings, reference)

A pair is slow below its reference (the operator's, for ``allreduce_pair_busbw_GBps``) or more than
``slow_pct`` below the median of the fleet's pairs. With each node in two pairs (three nodes and more),
a node slow in both of its pairs is named; a slow pair whose nodes are fine in their other pairs names
the link between them; of two nodes, the one pair cannot tell which of them is slow, and names both.
Every FAIL asks to check the fabric, for the node it names.
"""

from __future__ import annotations

import json
import random
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator import text
from orchestrator.config.workloads import Workload
from orchestrator.errors import MltrainError
from orchestrator.qualify.checks.base import overran
from orchestrator.qualify.checks.declaration import Declaration
from orchestrator.qualify.config import ProbeSettings, Suite
from orchestrator.qualify.micro import CONFIG_ENV, probe_config
from orchestrator.qualify.micro import timeout as probe_timeout
from orchestrator.qualify.probe_lines import ProbeRun
from orchestrator.results.qualification import CheckResult, Measurement, Reference, Remediation, Remedy, Status
from orchestrator.runners.base import JobSpec
from orchestrator.runners.jobs import StartedJob, start_job, stop_jobs
from orchestrator.runners.select import RunnerOptions, make_runner
from orchestrator.runners.slurm import node_address, node_gpus

Pair = tuple[str, str]
METRIC = "allreduce_pair_busbw_GBps"
QUEUE_S = 600.0
"""How long past the check's timeout mltrain waits for a pair's jobs: both must be scheduled at once
(Slurm's own limit, which counts from a job's start, is the timeout and 5 minutes)."""


@dataclass(frozen=True, kw_only=True)
class PairReading:
    """What one pair's all-reduce gave: its bus bandwidth, or why there is none."""

    pair: Pair
    value: float | None = None
    sanity: str = ""
    """How the sum was checked (its detail)."""
    wrong: str = ""
    """The sum came back wrong ("" when right)."""
    failed: str = ""
    """The pair's jobs ran but gave no number (a rank crashed, NCCL failed): the fabric's fault."""
    unrun: str = ""
    """The pair's jobs could not be started (not the fabric's fault)."""
    output: str = ""


def ring(nodes: Sequence[str]) -> list[Pair]:
    """Each node with the next, the last with the first: every node in two pairs (one, of two nodes)."""
    ordered = sorted(set(nodes))
    if len(ordered) < 2:
        return []
    if len(ordered) == 2:
        return [(ordered[0], ordered[1])]
    return [(ordered[i], ordered[(i + 1) % len(ordered)]) for i in range(len(ordered))]


def rounds(pairs: Sequence[Pair]) -> list[list[Pair]]:
    """The pairs in rounds whose pairs share no node (they run at the same time)."""
    left, found = list(pairs), []
    while left:
        busy: set[str] = set()
        batch = []
        for pair in list(left):
            if not busy & set(pair):
                batch.append(pair)
                busy |= set(pair)
                left.remove(pair)
        found.append(batch)
    return found


def label(pair: Pair) -> str:
    return f"{pair[0]}-{pair[1]}"


@dataclass(frozen=True, kw_only=True)
class Finding:
    """What the pairs say of one node: FAIL with its reason and remedy."""

    node: str
    reason: str
    remediation: Remediation


def judge(readings: Sequence[PairReading], declaration: Declaration, slow_pct: float,
          reference: Reference | None = None) -> tuple[CheckResult, list[Finding]]:
    """The fleet's pair check, and the nodes it names."""
    name = declaration.name
    nonsense = {r.pair: declaration.insane(METRIC, r.value, "GB/s") for r in readings if r.value is not None}
    measured = [r for r in readings if r.value is not None and not r.wrong and not nonsense[r.pair]]
    median = statistics.median(r.value for r in measured) if len(measured) >= 2 else None  # type: ignore[misc]
    bound = median * (1 - slow_pct / 100) if median is not None else None
    measurements, bad, reasons = [], {}, []
    for reading in readings:
        pair = label(reading.pair)
        if reading.unrun:
            reasons.append(f"{pair}: could not run: {reading.unrun}")
            continue
        if reading.failed or reading.wrong:
            bad[reading.pair] = reading.wrong or f"the all-reduce failed: {reading.failed}"
            continue
        value = reading.value
        assert value is not None
        if nonsense[reading.pair]:  # no measurement (its sanity rule): neither the pair's fault nor a pass
            reasons.append(f"{pair}: {nonsense[reading.pair]}")
            continue
        why = ""
        if reference is not None and reference.lower is not None and value < reference.lower:
            why = (f"{text.number(value)} GB/s below the lower bound {text.number(reference.lower)}"
                   f" ({reference.kind} reference: {reference.source})")
        elif bound is not None and value < bound:
            why = (f"{text.number(value)} GB/s is {(1 - value / median):.0%} below the median of the fleet's"  # type: ignore[operator]
                   f" {len(measured)} pairs, {text.number(median)} GB/s (slow_pct {slow_pct:g})")
        if why:
            bad[reading.pair] = why
        measurements.append(Measurement(metric=f"{METRIC}:{pair}", value=value, unit="GB/s",
                                        status=Status.FAIL if why else Status.PASS, reason=why,
                                        detail=reading.sanity, reference=reference))
    findings = culprits(readings, bad, name)
    reasons = [f.reason for f in findings] + reasons
    if findings:
        status = Status.FAIL
    elif any(r.unrun or nonsense.get(r.pair) for r in readings):
        status = Status.INCONCLUSIVE
    else:
        status = Status.PASS
    sanity = Status.FAIL if any(r.wrong or r.failed for r in readings) else (
        Status.INCONCLUSIVE if status is Status.INCONCLUSIVE else Status.PASS)
    result = CheckResult(
        name=name, kind=declaration.kind, status=status, sanity=sanity, reasons=tuple(reasons),
        sanity_reasons=tuple(f"{label(r.pair)}: {r.wrong or r.failed}" for r in readings if r.wrong or r.failed),
        measurements=tuple(measurements), remediation=tuple(f.remediation for f in findings),
        facts={"pairs": [label(r.pair) for r in readings], "median_GBps": median,
               "outputs": {label(r.pair): r.output for r in readings if r.output}})
    return result, findings


def culprits(readings: Sequence[PairReading], bad: dict[Pair, str], check: str) -> list[Finding]:
    """The nodes the bad pairs name: a node bad in every pair it is in (two or more), else both nodes of
    a bad pair (its link, or one of two that cannot be told apart)."""
    pairs_of: dict[str, list[Pair]] = {}
    for reading in readings:
        if not reading.unrun:
            for node in reading.pair:
                pairs_of.setdefault(node, []).append(reading.pair)
    named: dict[str, str] = {}
    for node, pairs in sorted(pairs_of.items()):
        if len(pairs) >= 2 and all(p in bad for p in pairs):
            named[node] = (f"node {node} is slow with each of its peers: "
                           + "; ".join(f"{label(p)} {bad[p]}" for p in sorted(pairs)))
    for pair, why in bad.items():
        if set(pair) & set(named):
            continue
        alone = all(len(pairs_of.get(node, [])) < 2 for node in pair)
        what = ("one of its two nodes (one pair cannot tell which)" if alone else
                f"the link between {pair[0]} and {pair[1]} (each is fine with its other peer)")
        for node in pair:
            named.setdefault(node, f"pair {label(pair)}: {why}: {what}")
    return [Finding(node=node, reason=why,
                    remediation=Remediation(action=Remedy.CHECK_FABRIC, check=check, node=node))
            for node, why in sorted(named.items())]


# ---------------------------------------------------------------- the pairs, measured on Slurm


@dataclass(frozen=True, kw_only=True)
class _PairJobs:
    """A pair's two jobs, rank 0's first, each with what its probe printed, and their limit."""

    ranks: list[tuple[StartedJob, ProbeRun]]
    timeout_s: float


@dataclass(frozen=True, kw_only=True)
class SlurmPairs:
    """Measures pairs of nodes: the probe's pair check started on both nodes of each pair at once, one
    Slurm job each, pinned to its node (rank 0 on the first, which hosts the rendezvous)."""

    declaration: Declaration
    suite: Suite
    probe: ProbeSettings
    workload: Workload
    run_id: str
    folder: Path
    partition: str | None = None
    status: Callable[[str], None] = lambda _: None

    def __call__(self, batch: Sequence[Pair]) -> list[PairReading]:
        started: dict[Pair, _PairJobs] = {}
        unrun: dict[Pair, str] = {}
        try:
            for pair in batch:
                try:
                    started[pair] = self._start(pair)
                except MltrainError as exc:
                    unrun[pair] = str(exc)
            return [self._read(pair, started.get(pair), unrun.get(pair, "")) for pair in batch]
        except BaseException:  # a stop signal: every job of the batch stopped in order
            stop_jobs([], [job for jobs in started.values() for job, _ in jobs.ranks])
            raise

    def _runner(self, node: str, gpus: int, timeout_s: float) -> Any:
        return make_runner(RunnerOptions(name="slurm", partition=self.partition, gpus="1" if gpus else None,
                                         nodelist=node, time_limit_minutes=timeout_s / 60 + 5), self.status)

    def _start(self, pair: Pair) -> _PairJobs:
        gpus = [node_gpus(node) for node in pair]
        kind = "cuda" if all(gpus) else "cpu"
        if self.suite.device(kind).settings(self.declaration.name) is None:
            raise MltrainError(f"the suite runs no {self.declaration.name} check between {kind} nodes")
        timeout_s = probe_timeout(self.declaration, self.suite, kind)  # as a probe check's on one node
        limit_s = timeout_s + QUEUE_S
        config = probe_config(self.suite, [self.declaration])
        config["device"] = "cuda" if kind == "cuda" else "cpu"
        env = {CONFIG_ENV: json.dumps(config), "WORLD_SIZE": "2", "MASTER_ADDR": node_address(pair[0]),
               "MASTER_PORT": str(random.randint(20000, 59999))}
        ranks: list[tuple[StartedJob, ProbeRun]] = []
        try:
            for rank, node in enumerate(pair):
                folder = self.folder / label(pair) / f"rank{rank}"
                spec = JobSpec(kind="step", name=f"pair-{label(pair)}-{rank}", run_id=self.run_id,
                               bundle=self.workload, command=self.probe.command, args=(str(self.probe.seed),),
                               env={**env, "RANK": str(rank)}, data_dir=folder, folder=folder,
                               declared="the probe's command (qualify.yaml `probe:`)")
                run = ProbeRun()
                ranks.append((start_job(self._runner(node, gpus[rank], timeout_s), spec,
                                        timeout_s=limit_s, on_line=run.observe), run))
        except BaseException:  # rank 0 would wait for its peer to its timeout
            stop_jobs([], [job for job, _ in ranks])
            raise
        self.status(f"  pair {label(pair)}: slurm jobs {', '.join(job.job_id for job, _ in ranks)}")
        return _PairJobs(ranks=ranks, timeout_s=limit_s)

    def _read(self, pair: Pair, jobs: _PairJobs | None, unrun: str) -> PairReading:
        if jobs is None:
            return PairReading(pair=pair, unrun=unrun or "not started")
        ranks = jobs.ranks
        outcomes = [job.finish() for job, _ in ranks]
        if any(o.timed_out for o in outcomes):  # a hang measures nothing: INCONCLUSIVE, as every check's
            why = overran(self.declaration.name, jobs.timeout_s, f" between {pair[0]} and {pair[1]}")
            return PairReading(pair=pair, unrun=why, output=str(outcomes[0].log))
        run = ranks[0][1]
        found = next((r for r in run.results if r.metric == METRIC), None)
        output = str(outcomes[0].log)
        if found is None:
            errors = "; ".join(str(e.get("error")) for run_ in (r for _, r in ranks) for e in run_.errors)
            skips = "; ".join(str(s.get("reason")) for s in run.skips)
            why = errors or skips or "; ".join(f"rank {i}: {o.why()}" for i, o in enumerate(outcomes) if not o.ok)
            return PairReading(pair=pair, failed=why or "rank 0 printed no result", output=output)
        if not found.sanity.passed:
            return PairReading(pair=pair, wrong=found.sanity.detail, output=output)
        return PairReading(pair=pair, value=found.performance.value, sanity=found.sanity.detail, output=output)


def measure_ring(nodes: Sequence[str], measure: Callable[[Sequence[Pair]], list[PairReading]],
                 status: Callable[[str], None] = lambda _: None) -> list[PairReading]:
    """Every ring pair of ``nodes``, round by round."""
    readings: list[PairReading] = []
    for number, batch in enumerate(rounds(ring(nodes)), start=1):
        started = time.monotonic()
        status(f"nccl_pairs round {number}: {', '.join(label(p) for p in batch)}")
        readings += measure(batch)
        status(f"nccl_pairs round {number} done in {time.monotonic() - started:.0f} s")
    return readings
