"""Fleet qualification on Slurm: one exclusive job per node runs that node's own qualification
(`mltrain qualify --runner local` on the node, so health is read there), writes its record, and the
records are gathered into one table: node, hardware, verdict, worst metric against the fleet
median of its hardware. A node slower than its peers by more than k MADs is flagged even where no
reference exists.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from orchestrator.config.workloads import Workload
from orchestrator.errors import MltrainError, RecordError, RunnerError
from orchestrator.qualify import judge
from orchestrator.qualify.config import FleetPolicy
from orchestrator.qualify.references import MAD_TO_SIGMA
from orchestrator.results.qualification import FleetRecord, FleetRow, QualificationRecord, Status, worst
from orchestrator.results.qualify_store import QualificationStore, new_qualification_id
from orchestrator.results.store import now_iso
from orchestrator.runners.base import SeedJob
from orchestrator.runners.slurm import SlurmJob, SlurmOptions, SlurmRunner, node_gpus, node_names

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
    node_args: tuple[str, ...]
    """Options every node's `mltrain qualify` gets (--references, --data, --strict)."""
    policy: FleetPolicy
    strict: bool = False
    warn_exit_code: int = 0


def select_nodes(plan: FleetPlan) -> list[str]:
    nodes = node_names(plan.partition) if plan.nodes == "all" else node_names(hostlist=plan.nodes)
    if not nodes:
        raise RunnerError(f"Slurm lists no node for --nodes {plan.nodes}" +
                          (f" in partition {plan.partition}" if plan.partition else ""))
    return nodes


def qualify_fleet(
    plan: FleetPlan, workload: Workload, project_root: Path, results_dir: Path, status: Callable[[str], None],
) -> tuple[FleetRecord, list[QualificationRecord]]:
    """The fleet's record and the node records it gathered."""
    started_at = now_iso()
    store = QualificationStore(results_dir)
    fleet_id = new_qualification_id("fleet", plan.suite_name)
    folder = store.root / "fleet" / fleet_id
    nodes = select_nodes(plan)
    status(f"fleet {fleet_id}: {len(nodes)} node(s): {', '.join(nodes)}")
    submitted: dict[str, tuple[SlurmJob | None, Path, str]] = {}
    for node in nodes:
        record_path = folder / node / "record.json"
        try:
            job = _submit(plan, node, workload, project_root, results_dir, record_path)
            submitted[node] = (job, record_path, "")
            status(f"  {node}: slurm job {job.job_id} submitted")
        except MltrainError as exc:
            submitted[node] = (None, record_path, str(exc))
            status(f"  {node}: not submitted: {exc}")
    records: dict[str, QualificationRecord] = {}
    problems: dict[str, str] = {}
    jobs: dict[str, str] = {}
    for node, (job, record_path, refused) in submitted.items():
        if job is None:
            problems[node] = refused
            continue
        jobs[node] = job.job_id
        ended = job.wait()
        try:
            records[node] = store.load(record_path)
            status(f"  {node}: {records[node].verdict.word}")
        except RecordError:
            tail = _tail(job.output)
            problems[node] = f"slurm job {job.job_id} ({ended.detail or f'exit {ended.code}'}) wrote no record" + (
                f": {tail}" if tail else "")
            status(f"  {node}: {problems[node]}")
    rows = fleet_rows(nodes, records, problems, plan.policy)
    verdict = worst([r.verdict for r in rows])
    if verdict is Status.PASS and any(r.flagged for r in rows):
        verdict = Status.WARN
    fleet = FleetRecord(
        fleet_id=fleet_id, suite=plan.suite_name, started_at=started_at, ended_at=now_iso(), verdict=verdict,
        exit_code=judge.exit_code(verdict, strict=plan.strict, warn_exit_code=plan.warn_exit_code),
        rows=tuple(rows), jobs=jobs,
    )
    store.save_fleet(fleet)
    return fleet, [records[n] for n in nodes if n in records]


def _submit(
    plan: FleetPlan, node: str, workload: Workload, project_root: Path, results_dir: Path, record_path: Path,
) -> SlurmJob:
    record_path.parent.mkdir(parents=True, exist_ok=True)
    gpus = plan.gpus
    if gpus is None:  # the node is qualified with every GPU it has: ask Slurm for all of them
        count = node_gpus(node)
        gpus = str(count) if count else None
    options = SlurmOptions(partition=plan.partition, gpus=gpus, nodelist=node, exclusive=True,
                           time_limit_minutes=plan.policy.timeout_minutes)
    told = ("--gpus", "none") if gpus == "none" else ()  # so that the node's verdict says its GPUs were left out
    command = ("python", "-m", "orchestrator.cli", "-q", "qualify", "--runner", "local", "--suite", plan.suite_name,
               "--node-name", node, "--results", str(results_dir), "--record", str(record_path), *plan.node_args,
               *told)
    env = {key: os.environ[key] for key in PASSED_ENV if key in os.environ}
    job = SeedJob(run_id=f"qualify-{node}", seed=0, workload=workload, data_dir=record_path.parent,
                  results_dir=record_path.parent / "results", env=env,
                  labels={"mltrain.qualify": node}, command=command)
    return SlurmRunner(project_root, options).submit(job)


def _tail(path: Path, lines: int = 2) -> str:
    try:
        kept = [line.strip() for line in path.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return " | ".join(kept[-lines:])[:300]


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
            rows.append(FleetRow(node=node, hardware="?", verdict=Status.ERROR, reason=problems.get(node, "no record")))
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
                             worst_vs_fleet_pct=worst_pct, flagged=flagged, reason=reason))
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
                why = (f"{metric} {m.value:.4g} {m.unit} is {-pct:.1f}% worse than the fleet median {median:.4g}"
                       f" of {len(values)} {record.hardware.key} nodes (> {policy.k_mad:g} MADs)")
    return worst_metric, None if worst_pct is None else round(worst_pct, 2), flagged, why
