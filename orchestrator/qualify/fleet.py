"""Fleet qualification on Slurm: one exclusive job per node runs that node's own qualification
(`mltrain qualify order FILE` on the node, with the local runner, so health is read there; the
file is the fleet's typed `NodeOrder`), writes its record, and the records are gathered into one
table: node, hardware, verdict, worst metric against the fleet median of its hardware. A node slower
than its peers by more than k MADs is flagged even where no reference exists.

The node jobs run as every job does (`orchestrator.runners.jobs`): started together, each followed
to its end; a stop signal cancels them all; a fleet a killed mltrain left is found by its lock and
its jobs cancelled when the next fleet starts.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator import text
from orchestrator.config.workloads import Workload
from orchestrator.errors import MltrainError, RecordError, RunnerError
from orchestrator.qualify import judge, pairs
from orchestrator.qualify.checks.pairs import FleetContext
from orchestrator.qualify.config import FleetPolicy, ProbeSettings, Suite
from orchestrator.qualify.leftovers import stop_abandoned
from orchestrator.qualify.pairs import Finding, Pair, PairReading, SlurmPairs
from orchestrator.qualify.references import MAD_TO_SIGMA, load_references
from orchestrator.results.qualification import (
    CheckResult,
    FleetRecord,
    FleetRow,
    NodeOrder,
    QualificationRecord,
    Status,
    worst,
)
from orchestrator.results.qualifications import Qualifications, new_qualification_id
from orchestrator.results.store import Store, now_iso
from orchestrator.runners.base import JobSpec, Runner
from orchestrator.runners.jobs import StartedJob, start_job, stop_jobs
from orchestrator.runners.outcome import JobOutcome
from orchestrator.runners.select import RunnerOptions, make_runner
from orchestrator.runners.slurm import node_gpus, node_names

if TYPE_CHECKING:
    from orchestrator.qualify.checks.registry import Registry

PASSED_ENV = ("MLTRAIN_WORKLOADS", "MLTRAIN_SEEDS_FILE", "MLTRAIN_QUALIFY_FILE", "XDG_CACHE_HOME")
"""Where this orchestrator finds its files: the node's qualification must find the same."""
MIN_PEERS = 3
"""Fewer nodes of one hardware than this: no fleet median worth comparing against."""


@dataclass(frozen=True, kw_only=True)
class FleetPlan:
    suite_name: str
    nodes: str
    """all, or a Slurm hostlist (node[01-04],gpu7)."""
    partition: str | None
    gpus: str | None
    """--gpus per node job: None for each node's own GPUs (its Slurm gres, every one), a count, or none."""
    references: Path | None = None
    """Operator references every node's qualification judges against (an absolute path)."""
    data: Path | None = None
    """The dataset every node times (an absolute path on the shared file system)."""
    policy: FleetPolicy
    strict: bool = False
    warn_exit_code: int = 0
    suite: Suite | None = None
    """The suite, for the checks the fleet runs between its nodes (None: none)."""
    probe: ProbeSettings
    """How the probe runs (qualify.yaml ``probe:``), for those checks."""
    checks: Registry
    """The checks there are: the command's, built once."""
    expect_gpus: int | None = None
    """--expect-gpus: the GPUs every node is expected to have (None: each node's Slurm gres)."""


def select_nodes(plan: FleetPlan) -> list[str]:
    nodes = node_names(plan.partition) if plan.nodes == "all" else node_names(hostlist=plan.nodes)
    if not nodes:
        raise RunnerError(f"Slurm lists no node for --nodes {plan.nodes}" +
                          (f" in partition {plan.partition}" if plan.partition else ""))
    return nodes


def qualify_fleet(
    plan: FleetPlan, workload: Workload, results_dir: Path, status: Callable[[str], None],
    measure_pairs: Callable[[Sequence[Pair]], list[PairReading]] | None = None,
) -> tuple[FleetRecord, list[QualificationRecord]]:
    """The fleet's record and the node records it gathered. ``measure_pairs``: how a batch of node pairs
    is measured (default: the probe's pair check as Slurm jobs, `pairs.SlurmPairs`)."""
    started_at = now_iso()
    store = Store(results_dir).qualifications
    fleet_id = new_qualification_id("fleet", plan.suite_name)
    nodes = select_nodes(plan)
    lock = store.begin(store.fleet_dir(fleet_id), fleet_id)
    try:
        stop_abandoned(store, store.root / "fleet", _runner(plan, status), status)
        status(f"fleet {fleet_id}: {len(nodes)} node(s): {', '.join(nodes)}")
        outcomes, problems = run_nodes(plan, nodes, workload, store, fleet_id, status)
        records: dict[str, QualificationRecord] = {}
        for node, outcome in outcomes.items():
            record_path = store.paths.node_record(fleet_id, node)
            try:
                records[node] = store.load(record_path)
                status(f"  {node}: {records[node].verdict.word}")
            except RecordError:
                problems[node] = f"slurm job {outcome.job_id} ({outcome.why()}) wrote no record"
                status(f"  {node}: {problems[node]}")
        # under the fleet's lock too: the jobs of a killed fleet's checks are found by it
        between = run_fleet_checks(plan, [n for n in nodes if n in records], records, workload, store, fleet_id,
                                   status, measure_pairs)
    finally:
        store.end(lock)
    rows = fleet_rows(nodes, records, problems, plan.policy)
    checks = [check for check, _ in between]  # a fleet check's FAIL names its nodes, each with its remedy
    for check, findings in between:
        rows = with_findings(rows, check.name, findings)
    verdict = worst([r.verdict for r in rows] + [c.status for c in checks if c.status is not Status.NOT_APPLICABLE])
    if verdict is Status.PASS and any(r.flagged for r in rows):
        verdict = Status.WARN
    fleet = FleetRecord(
        fleet_id=fleet_id, suite=plan.suite_name, started_at=started_at, ended_at=now_iso(), verdict=verdict,
        exit_code=judge.exit_code(verdict, strict=plan.strict, warn_exit_code=plan.warn_exit_code),
        rows=tuple(rows), jobs={node: outcome.job_id for node, outcome in outcomes.items()}, checks=tuple(checks),
    )
    store.save_fleet(fleet)
    return fleet, [records[n] for n in nodes if n in records]


def run_nodes(
    plan: FleetPlan, nodes: list[str], workload: Workload, store: Qualifications, fleet_id: str,
    status: Callable[[str], None],
) -> tuple[dict[str, JobOutcome], dict[str, str]]:
    """Each node's job submitted, then each followed to its end: (node -> outcome, node -> why it
    could not be submitted). A stop signal (or an error) cancels every job of the fleet."""
    started: dict[str, StartedJob] = {}
    problems: dict[str, str] = {}
    try:
        for node in nodes:
            try:
                runner = _runner(plan, status, node=node)
                started[node] = start_job(runner, node_job(plan, node, workload, store, fleet_id), timeout_s=None)
                status(f"  {node}: slurm job {started[node].job_id} submitted")
            except MltrainError as exc:
                problems[node] = str(exc)
                status(f"  {node}: not submitted: {exc}")
        return {node: job.finish() for node, job in started.items()}, problems
    except BaseException:
        stop_jobs([(_runner(plan, status), fleet_id)], started.values())
        raise


def _runner(plan: FleetPlan, status: Callable[[str], None], *, node: str | None = None) -> Runner:
    """The Slurm runner of the fleet; with ``node``, the one that runs that node's job (pinned to
    it, alone there, with every GPU Slurm knows it to have unless --gpus said otherwise). Its time
    limit is the fleet policy's: a job may wait in the queue for as long as the cluster needs."""
    gpus = plan.gpus
    if node is not None and gpus is None:  # the node is qualified with every GPU it has
        count = node_gpus(node)
        gpus = str(count) if count else None
    return make_runner(RunnerOptions(name="slurm", partition=plan.partition, gpus=gpus, nodelist=node,
                                     exclusive=node is not None, time_limit_minutes=plan.policy.timeout_minutes),
                       status)


def _expected(plan: FleetPlan, node: str) -> dict[str, Any]:
    """The GPUs ``node`` is expected to have (`qualify.expected`): --expect-gpus, else its Slurm gres."""
    if plan.expect_gpus is not None:
        return {"expect_gpus": plan.expect_gpus, "expect_gpus_source": f"--expect-gpus {plan.expect_gpus}"}
    count = node_gpus(node)
    return {"expect_gpus": count, "expect_gpus_source": f"Slurm's gres for {node}: {count or 'no'} GPU(s)"}


def node_job(plan: FleetPlan, node: str, workload: Workload, store: Qualifications, fleet_id: str) -> JobSpec:
    """The job that qualifies ``node``: its order written, and `mltrain qualify order` to read it."""
    folder = store.fleet_dir(fleet_id) / node
    order = store.save_order(NodeOrder(
        fleet_id=fleet_id, node=node, suite=plan.suite_name, results=store.root.parent,
        record=store.paths.node_record(fleet_id, node),
        references=plan.references, data=plan.data, strict=plan.strict,
        gpus="none" if plan.gpus == "none" else None,  # so that the node's verdict says its GPUs were left out
        **_expected(plan, node),
    ))
    env = {key: os.environ[key] for key in PASSED_ENV if key in os.environ}
    return JobSpec(kind="node", name=f"node-{node}", run_id=fleet_id, bundle=workload,
                   command=("python", "-m", "orchestrator.cli", "-q", "qualify", "order", str(order)), env=env,
                   data_dir=folder, folder=folder, declared="a fleet's node job")


def run_fleet_checks(
    plan: FleetPlan, nodes: list[str], records: dict[str, QualificationRecord], workload: Workload,
    store: Qualifications, fleet_id: str, status: Callable[[str], None],
    measure_pairs: Callable[[Sequence[Pair]], list[PairReading]] | None = None,
) -> list[tuple[CheckResult, list[Finding]]]:
    """Each check the suite runs between the fleet's nodes (those whose own qualification left a record)."""
    registry = plan.checks
    suite = plan.suite
    if suite is None:
        return []
    wanted = [c for c in registry if c.declaration.runs == "fleet" and suite.wants(c.declaration.name)]
    reference = None
    if wanted and plan.references is not None and records:
        given = load_references(plan.references).for_hardware(next(iter(records.values())).hardware)
        reference = given.get(pairs.METRIC)
    found = []
    for check in wanted:
        declaration = check.declaration
        status(f"{declaration.name}: between {len(nodes)} node(s)")
        measure = measure_pairs or SlurmPairs(
            declaration=declaration, suite=suite, probe=plan.probe, workload=workload,
            run_id=fleet_id, folder=store.fleet_dir(fleet_id) / declaration.name, partition=plan.partition,
            status=status)
        ctx = FleetContext(nodes=nodes, settings=lambda kind, n=declaration.name: suite.device(kind).settings(n),
                           measure=measure, reference=reference, status=status)
        result, findings = check.run_fleet(ctx)
        status(f"{declaration.name}: {result.status.word}" + (f" ({result.reason})" if result.reason else ""))
        found.append((result, findings))
    return found


def with_findings(rows: list[FleetRow], check: str, findings: Sequence[Finding]) -> list[FleetRow]:
    """The fleet's rows with the nodes a fleet check names FAILed, its reason first, its remedy added."""
    named = {f.node: f for f in findings}
    updated = []
    for row in rows:
        finding = named.get(row.node)
        if finding is None:
            updated.append(row)
            continue
        reason = f"{check}: {finding.reason}" + (f"; {row.reason}" if row.reason else "")
        updated.append(row.model_copy(update={"verdict": worst([row.verdict, Status.FAIL]), "reason": reason,
                                              "remediation": (*row.remediation, finding.remediation)}))
    return updated


def fleet_rows(
    nodes: list[str], records: dict[str, QualificationRecord], problems: dict[str, str], policy: FleetPolicy,
) -> list[FleetRow]:
    """One row per node: its verdict, and its worst metric against the median of its hardware peers."""
    peers: dict[str, list[QualificationRecord]] = {}
    for record in records.values():
        peers.setdefault(record.hardware.key, []).append(record)
    rows: list[FleetRow] = []
    for node in nodes:
        record = records.get(node)
        if record is None:
            rows.append(FleetRow(node=node, hardware="?", verdict=Status.INCONCLUSIVE,
                                 reason=problems.get(node, "no record")))
            continue
        group = peers[record.hardware.key]
        worst_metric, worst_pct, flagged, why = _against_peers(record, group, policy)
        reason = record.reasons[0] if record.reasons else ""
        if flagged:
            reason = why + (f"; {reason}" if reason else "")
        elif len(group) < MIN_PEERS and not reason:
            reason = f"{len(group)} node(s) of this hardware: too few peers to compare (needs {MIN_PEERS})"
        rows.append(FleetRow(node=node, hardware=record.hardware.key, verdict=record.verdict,
                             qualification_id=record.qualification_id, worst_metric=worst_metric,
                             worst_vs_fleet_pct=worst_pct, flagged=flagged, reason=reason,
                             remediation=record.remediation))
    return rows


def _against_peers(
    record: QualificationRecord, group: list[QualificationRecord], policy: FleetPolicy,
) -> tuple[str | None, float | None, bool, str]:
    worst_metric: str | None = None
    worst_pct: float | None = None
    flagged, why = False, ""
    for metric, m in record.measurements().items():
        values = [v.value for r in group if (v := r.measurements().get(metric)) is not None]
        if len(values) < 2:
            continue
        median = statistics.median(values)
        if median == 0:
            continue
        sign = 1 if m.better == "higher" else -1
        pct = sign * (m.value - median) / abs(median) * 100
        if worst_pct is None or pct < worst_pct:
            worst_metric, worst_pct = metric, pct
        if len(values) >= MIN_PEERS:
            mad = statistics.median(abs(v - median) for v in values) * MAD_TO_SIGMA
            shortfall = -pct / 100 * abs(median)
            if shortfall > policy.k_mad * mad and -pct > policy.floor_pct and not flagged:
                flagged = True
                why = (f"{metric} {text.number(m.value)} {m.unit} is {-pct:.1f}% worse than the fleet median"
                       f" {text.number(median)}"
                       f" of {len(values)} {record.hardware.key} nodes (> {policy.k_mad:g} MADs)")
    return worst_metric, None if worst_pct is None else round(worst_pct, 2), flagged, why
