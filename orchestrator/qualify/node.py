"""One node's qualification, top to bottom:

    health reads -> runner -> the suite's checks in a loop, by phase: under load (the probe's, the
    workload's throughput, inference), after it (DCGM, time-to-train), last (health's verdict) ->
    the GPUs NVML sees against those the probe's CUDA used -> references (operator file, model
    floors, learned history) -> judged checks, a failing number measured again (the quorum, through
    the same check objects) -> verdict -> stored record

The checks are the registry's (`orchestrator.qualify.checks`): which ones a suite runs, in which
order, whether their numbers are the device's, whether the quorum may repeat them, all come from
their declarations; each runs within its own timeout (`checks.base.run_check`).

Health is read here, on the node, through NVML (sampled while the load runs); everything that
needs torch runs through the runner, where the workload runs. The orchestrator process never
imports torch. Health, DCGM and the hardware count cover every GPU NVML sees (the node); the probe
and the throughput cover the GPUs the runner gave them (every one, unless --gpus narrowed it): a
GPU CUDA cannot use, counts that differ, or checks that ran on the CPU of a GPU node FAIL.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import time
from pathlib import Path
from types import ModuleType
from typing import Any

from orchestrator.errors import MltrainError, StoreWriteError
from orchestrator.insight import sysinfo
from orchestrator.qualify import devices, judge, quorum, remedies
from orchestrator.qualify.checks.base import Overran, in_thread, leftover_warnings, run_check
from orchestrator.qualify.checks.context import NodeContext, NodePlan, Watch
from orchestrator.qualify.drift import Drift
from orchestrator.qualify.expected import expected_gpus, gpu_finding
from orchestrator.qualify.floors import load_floors
from orchestrator.qualify.health import HealthMonitor
from orchestrator.qualify.leftovers import stop_abandoned
from orchestrator.qualify.probe_lines import ProbeRun
from orchestrator.qualify.references import (
    References,
    comparable_history,
    learned_references,
    passing_runs,
)
from orchestrator.results import atomic
from orchestrator.results.qualification import CheckResult, Hardware, QualificationRecord, Remediation, Status
from orchestrator.results.qualifications import Qualifications, new_qualification_id
from orchestrator.results.store import Store, now_iso
from orchestrator.runners.base import Runner


def default_node_name() -> str:
    return socket.gethostname().split(".")[0] or "localhost"


def qualify_node(
    plan: NodePlan,
    runner: Runner,
    results_dir: Path,
    watch: Watch,
    *,
    nvml: ModuleType | None = None,
    dev: Path = Path("/dev"),
) -> QualificationRecord:
    """Run the suite on this node and store its judged record."""
    started_at, started = now_iso(), time.monotonic()
    store = Store(results_dir).qualifications
    qid = new_qualification_id(plan.node, plan.suite_name)
    folder = store.new_folder(plan.node, qid)  # the node's folder checked before anything is written
    scratch = atomic.make_folder(folder / "no-data")
    timings = watch.timings

    t = time.monotonic()
    health = _open_health(plan, nvml, dev)
    timings["health_reads"] = time.monotonic() - t
    watch.status(f"node {plan.node}: suite {plan.suite_name}, runner {runner.name},"
                 f" {health.gpu_count or 'no'} GPU(s){' (' + health.gpu_model + ')' if health.gpu_model else ''}")
    names = in_suite(plan)
    ctx = NodeContext(plan=plan, runner=runner, run_id=qid, folder=folder, scratch=scratch, results_dir=results_dir,
                      health=health, watch=watch, names=tuple(names))
    results: dict[str, CheckResult] = {}
    provenance: dict[str, Any] = {}
    lock = store.begin(folder, qid)  # held while its jobs run: those of a killed qualify are found by it
    try:
        t = time.monotonic()
        watch.status(f"preparing the {runner.name} runner for {plan.workload.name}")
        try:
            provenance = runner.prepare(plan.workload)
        except MltrainError as exc:
            ctx.prepare_error = f"the {runner.name} runner could not prepare {plan.workload.name}: {exc}"
        timings["runner_prepare"] = time.monotonic() - t
        if not ctx.prepare_error:
            stop_abandoned(store, store.node_dir(plan.node), runner, watch.status)
        with health.under_load():
            results.update(_run_phase(ctx, "load"))
        gpus = health.gpus
        if gpus and ctx.kind == "cpu" and plan.gpus != "none":
            results = {name: devices.not_on_the_gpus(check, gpus) if plan.checks.get(name).declaration.device_bound
                       else check for name, check in results.items()}
        results.update(_run_phase(ctx, "after"))
        results.update(_run_phase(ctx, "close"))
    finally:
        health.close()
        store.end(lock)
    checks = [results[name] for name in names]
    probe = ctx.probe or ProbeRun()
    on_gpus = ctx.gpus
    hardware = _hardware(health, probe)
    software = _software(plan, runner.name, health, probe, provenance)
    history = store.history(plan.node).records
    comparable, why = comparable_history(history, hardware, software, plan.config.history)
    fleet, _ = comparable_history(store.history().records, hardware, software, plan.config.history)
    references = References(
        operator=plan.references.for_hardware(hardware) if plan.references else {},
        node=learned_references(comparable, plan.config.history),
        fleet=learned_references(fleet, plan.config.history, kind="fleet"),
        floors=load_floors().references(checks, _models(gpus, on_gpus), plan.workload.name,
                                        links=_links(health.before, on_gpus), gpu_count=health.gpu_count,
                                        settings=lambda name: plan.suite.device(ctx.kind).settings(name),
                                        declared=plan.checks.declaration),
    )
    drift = Drift(passing_runs(history, hardware, software), plan.config.drift)
    judged = quorum.confirm(checks, lambda c: judge.judge_check(c, references, plan.config.history, drift),
                            lambda again, attempt: _again(ctx, again, attempt), plan.config.quorum, watch.status,
                            repeatable=plan.checks.repeatable)
    judged = [remedies.remediate(c, plan.checks.declaration(c.name)) for c in judged]
    for check in judged:
        watch.checked(check)
    for warning in leftover_warnings(judged):
        watch.status(warning)
    found = gpu_finding(expected_gpus(plan.expect_gpus, history), health.gpu_count, health.reason)
    verdict, reasons = judge.node_verdict(judged, plan.checks.passive, found)
    missing = (Remediation(action=found.remedy, check="gpu_health"),) if found and found.remedy else ()
    code = judge.exit_code(verdict, strict=plan.strict, warn_exit_code=plan.config.warn_exit_code)
    record = QualificationRecord(
        qualification_id=qid, node=plan.node, suite=plan.suite_name, runner=runner.name, started_at=started_at,
        ended_at=now_iso(), duration_s=time.monotonic() - started, verdict=verdict, exit_code=code, reasons=reasons,
        strict=plan.strict, hardware=hardware, software=software, checks=tuple(judged),
        references_file=str(plan.references.path) if plan.references else None, workload=plan.workload.name,
        time_to_train_run=ctx.time_to_train_run, timings={k: round(v, 3) for k, v in timings.items()},
        system={"host": sysinfo.host_info(), "gpus": {**health.system, "devices": health.before} if health.session
                else {"available": False, "reason": health.reason or "no GPU"},
                "software": sysinfo.software_versions(), "probe": probe.device, "runner": provenance,
                "gpu_scope": _scope(plan, health, probe, on_gpus),
                "history": why or f"references learned from {len(comparable)} passing runs",
                "data": str(plan.data) if plan.data else None},
        remediation=remedies.ordered((*missing, *remedies.of_node(judged))),
    )
    return _saved(store, record)


def _saved(store: Qualifications, record: QualificationRecord) -> QualificationRecord:
    """The record, stored. One that cannot be written (a full disk, a quota) is INCONCLUSIVE (exit 3)
    whatever its checks said: a node is never failed, nor passed, by a write of mltrain's."""
    try:
        store.save(record)
    except StoreWriteError as exc:
        return record.model_copy(update={
            "verdict": Status.INCONCLUSIVE, "exit_code": judge.exit_code(Status.INCONCLUSIVE, strict=record.strict),
            "reasons": (f"the record could not be saved ({exc}): free the space and qualify again; its checks said"
                        f" {record.verdict.word}", *record.reasons),
        })
    return record


def in_suite(plan: NodePlan) -> list[str]:
    """The checks the suite runs on a node, in the order its record lists them: those without settings
    always (health, DCGM), the others where the suite gives them settings (a probe check also where
    qualify.yaml's ``probe.checks`` names it)."""
    suite, names = plan.suite, []
    for declaration in plan.checks.declarations:
        if declaration.runs == "fleet":
            continue
        if declaration.settings_at == "device":
            wanted = suite.wants(declaration.name) and (
                declaration.runs != "probe" or declaration.name in plan.config.probe.checks)
        elif declaration.settings_at == "suite":
            wanted = getattr(suite, declaration.name, None) is not None
        else:
            wanted = True
        if wanted:
            names.append(declaration.name)
    return plan.checks.ordered(names, plan.config.probe.checks)


def _run_phase(ctx: NodeContext, phase: str) -> dict[str, CheckResult]:
    """Every check of the context's that runs in ``phase``, in order."""
    return {check.declaration.name: run_check(check, ctx) for check in ctx.plan.checks.node_checks(ctx.names)
            if check.declaration.phase == phase}


def _again(ctx: NodeContext, names: tuple[str, ...], attempt: int) -> list[CheckResult]:
    """The quorum's ``attempt``-th repeat of ``names``: each check run again, as the first run ran it,
    in a folder of its own (``repeat-<n>/``); health is not sampled again (its check covered the load)."""
    again = ctx.again(names, attempt)
    return [run_check(check, again) for check in ctx.plan.checks.node_checks(names)]


def _open_health(plan: NodePlan, nvml: ModuleType | None, dev: Path) -> HealthMonitor:
    """The node's health monitor, its first NVML reads within gpu_health's timeout (a driver that does
    not answer makes gpu_health INCONCLUSIVE, and the other checks still run)."""
    declared = plan.checks.declaration("gpu_health")
    limit = declared.timeout_s if declared is not None else 120.0
    try:
        return in_thread(lambda: HealthMonitor(plan.config.health, nvml, dev), name="gpu_health", timeout_s=limit)
    except Overran as exc:
        return HealthMonitor(plan.config.health, nvml, dev, unanswered=f"{exc} (NVML did not answer)")


def _models(gpus: list[devices.Gpu], on_gpus: dict[int, devices.Gpu]) -> dict[int | None, str | None]:
    """The model of each NVML GPU, and (key None) of the GPU the cases without a GPU index ran on:
    CUDA's GPU 0, or the node's one model when the probe did not say which GPU that was."""
    models: dict[int | None, str | None] = {g.index: g.name for g in gpus}
    names = {g.name for g in gpus if g.name}
    models[None] = on_gpus[0].name if 0 in on_gpus else (names.pop() if len(names) == 1 else None)
    return models


def _links(devices_read: list[dict[str, Any]], on_gpus: dict[int, devices.Gpu]) -> dict[int | None, tuple[int, int]]:
    """The PCIe link of each NVML GPU (the most it can train to in its slot: generation, width), and
    (key None) of the GPU the cases without a GPU index ran on (CUDA's GPU 0)."""
    links: dict[int | None, tuple[int, int]] = {}
    for entry in devices_read:
        generation, width = entry.get("pcie_max_generation"), entry.get("pcie_max_width")
        if isinstance(entry.get("index"), int) and isinstance(generation, int) and isinstance(width, int):
            links[entry["index"]] = (generation, width)
    first = on_gpus.get(0)
    if first is not None and first.index in links:
        links[None] = links[first.index]
    return links


def _scope(
    plan: NodePlan, health: HealthMonitor, probe: ProbeRun, on_gpus: dict[int, devices.Gpu],
) -> dict[str, Any]:
    """Which GPUs each part covered: health, DCGM and the count the node's; the probe and the
    throughput the runner's (CUDA index -> the NVML GPU it is)."""
    return {
        "requested": plan.gpus or "the runner's default: every GPU it can hand out",
        "node": f"health, DCGM and the hardware count: every GPU NVML sees ({health.gpu_count})",
        "checks": (f"probe and throughput: the {probe.device.get('gpu_count', 0)} GPU(s) CUDA saw"
                   if probe.device_kind == "cuda" else "probe and throughput: the CPU"),
        "cuda_to_nvml": {f"cuda:{c}": g.label for c, g in sorted(on_gpus.items())},
    }


def _hardware(health: HealthMonitor, probe: ProbeRun) -> Hardware:
    host = sysinfo.host_info()
    cpu = host.get("cpu_model")
    return Hardware(
        gpu_model=health.gpu_model, gpu_count=health.gpu_count,
        cpu_model=cpu if isinstance(cpu, str) else str(probe.device.get("device_name") or "unknown CPU"),
        cpus=len(os.sched_getaffinity(0)),
    )


def _software(
    plan: NodePlan, runner: str, health: HealthMonitor, probe: ProbeRun, provenance: dict[str, Any],
) -> dict[str, str]:
    """What learned references must share: the stack the numbers came from, and the suite itself."""
    suite = json.dumps(plan.suite.model_dump(mode="json"), sort_keys=True)
    image = provenance.get("image") if isinstance(provenance.get("image"), dict) else {}
    found = {
        "runner": runner,
        "torch": probe.device.get("torch"),
        "cuda_runtime": probe.device.get("cuda_runtime"),
        "driver": health.system.get("driver_version") if health.session else None,
        "image": image.get("id") if image else None,
        "workload": plan.workload.name,
        "suite": hashlib.sha256(suite.encode()).hexdigest()[:12],
    }
    return {k: str(v) for k, v in found.items() if v is not None and not isinstance(v, dict)}
