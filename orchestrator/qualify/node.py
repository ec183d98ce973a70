"""One node's qualification, top to bottom:

    health reads -> runner -> [probe, workload throughput] under load -> DCGM -> time-to-train (full)
    -> the GPUs NVML sees against those the probe's CUDA used -> references (operator file, model
    floors, learned history) -> judged checks -> verdict -> stored record

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
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from orchestrator import text
from orchestrator.config.profiles import Profiles
from orchestrator.config.workloads import Workload
from orchestrator.errors import MltrainError, StoreWriteError
from orchestrator.insight import sysinfo
from orchestrator.qualify import devices, judge, micro, quorum
from orchestrator.qualify.config import InferenceSpec, QualifyConfig, Suite
from orchestrator.qualify.dcgm import dcgm_check
from orchestrator.qualify.drift import Drift
from orchestrator.qualify.floors import load_floors
from orchestrator.qualify.health import HealthMonitor
from orchestrator.qualify.inference import inference_check
from orchestrator.qualify.leftovers import stop_abandoned
from orchestrator.qualify.probe_lines import ProbeRun
from orchestrator.qualify.references import (
    OperatorReferences,
    References,
    comparable_history,
    learned_references,
    passing_runs,
)
from orchestrator.qualify.remeasure import NodeRepeats
from orchestrator.qualify.throughput import throughput_check
from orchestrator.results import atomic
from orchestrator.results.qualification import CheckResult, Hardware, QualificationRecord, Status
from orchestrator.results.qualifications import Qualifications, new_qualification_id
from orchestrator.results.store import Store, now_iso
from orchestrator.runners.base import Runner


@dataclass(frozen=True, kw_only=True)
class NodePlan:
    """Everything decided before a check runs."""

    node: str
    suite_name: str
    suite: Suite
    config: QualifyConfig
    workload: Workload
    data: Path | None = None
    """The dataset whose storage is timed and whose loader the throughput mode measures."""
    references: OperatorReferences | None = None
    strict: bool = False
    profiles: Profiles | None = None
    """seeds.yaml, for the full suite's time-to-train seed."""
    inference_roots: tuple[Path, ...] = ()
    """Where the inference harness's declaration is found, for a suite that times inference."""
    gpus: str | None = None
    """``--gpus`` as the runner got it: None for its default (the node's GPUs), ``none`` when the
    operator kept the checks off the GPUs (the verdict then says they were not qualified)."""


@dataclass
class Watch:
    """How the caller follows a qualification: a status line per step, a callback per check."""

    status: Callable[[str], None] = lambda _: None
    checked: Callable[[CheckResult], None] = lambda _: None
    detail: Callable[[str], None] = lambda _: None
    timings: dict[str, float] = field(default_factory=dict)


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
    health = HealthMonitor(plan.config.health, nvml, dev)
    timings["health_reads"] = time.monotonic() - t
    watch.status(f"node {plan.node}: suite {plan.suite_name}, runner {runner.name},"
                 f" {health.gpu_count or 'no'} GPU(s){' (' + health.gpu_model + ')' if health.gpu_model else ''}")
    checks: list[CheckResult] = []
    provenance: dict[str, Any] = {}
    ttt_run: str | None = None
    lock = store.begin(folder, qid)  # held while its jobs run: those of a killed qualify are found by it
    try:
        t = time.monotonic()
        watch.status(f"preparing the {runner.name} runner for {plan.workload.name}")
        try:
            provenance = runner.prepare(plan.workload)
            prepare_error = ""
        except MltrainError as exc:
            prepare_error = f"the {runner.name} runner could not prepare {plan.workload.name}: {exc}"
        timings["runner_prepare"] = time.monotonic() - t
        if not prepare_error:
            stop_abandoned(store, store.node_dir(plan.node), runner, watch.status)
        gpus = health.gpus
        with health.under_load():
            probe = _probe(plan, runner, qid, folder, scratch, prepare_error, watch)
            on_gpus = devices.match(gpus, probe.device)
            for check in micro.probe_checks(probe, plan.suite, plan.config.probe, on_gpus):
                checks.append(check)
            kind = probe.device_kind or ("cuda" if health.gpu_count else "cpu")
            checks.append(_throughput(plan, runner, qid, folder, scratch, kind, prepare_error, watch))
            inference = plan.suite.device(kind).inference  # type: ignore[arg-type]
            if inference is not None:
                checks.append(_inference(plan, runner, qid, folder, inference, watch))
        if gpus and probe.device_kind == "cpu" and plan.gpus != "none":
            checks = [devices.not_on_the_gpus(check, gpus) for check in checks]
        checks.insert(0, _timed("dcgm_diag", timings, lambda: dcgm_check(plan.suite.dcgm_level, health.gpu_count),
                                watch))
        if plan.suite.time_to_train is not None:
            check, ttt_run = _time_to_train(plan, runner, results_dir, prepare_error, watch)
            checks.append(check)
        checks.insert(0, health.result(devices.cuda_findings(gpus, probe.device, plan.gpus)))
    finally:
        health.close()
        store.end(lock)
    hardware = _hardware(health, probe)
    software = _software(plan, runner.name, health, probe, provenance)
    history = store.history(plan.node).records
    comparable, why = comparable_history(history, hardware, software, plan.config.history)
    fleet, _ = comparable_history(store.history().records, hardware, software, plan.config.history)
    references = References(
        operator=plan.references.for_hardware(hardware) if plan.references else {},
        node=learned_references(comparable, plan.config.history),
        fleet=learned_references(fleet, plan.config.history, kind="fleet"),
        floors=load_floors().references(checks, _models(gpus, on_gpus), plan.workload.name),
    )
    drift = Drift(passing_runs(history, hardware, software), plan.config.drift)
    repeats = NodeRepeats(runner=runner, workload=plan.workload, suite=plan.suite, probe=plan.config.probe, run_id=qid,
                          folder=folder, scratch=scratch, data=plan.data, kind=kind, gpus=on_gpus, status=watch.status,
                          inference_roots=plan.inference_roots)
    judged = quorum.confirm(checks, lambda c: judge.judge_check(c, references, plan.config.history, drift), repeats,
                            plan.config.quorum, watch.status)
    for check in judged:
        watch.checked(check)
    verdict, reasons = judge.node_verdict(judged)
    code = judge.exit_code(verdict, strict=plan.strict, warn_exit_code=plan.config.warn_exit_code)
    record = QualificationRecord(
        qualification_id=qid, node=plan.node, suite=plan.suite_name, runner=runner.name, started_at=started_at,
        ended_at=now_iso(), duration_s=time.monotonic() - started, verdict=verdict, exit_code=code, reasons=reasons,
        strict=plan.strict, hardware=hardware, software=software, checks=tuple(judged),
        references_file=str(plan.references.path) if plan.references else None, workload=plan.workload.name,
        time_to_train_run=ttt_run, timings={k: round(v, 3) for k, v in timings.items()},
        system={"host": sysinfo.host_info(), "gpus": {**health.system, "devices": health.before} if health.session
                else {"available": False, "reason": health.reason or "no GPU"},
                "software": sysinfo.software_versions(), "probe": probe.device, "runner": provenance,
                "gpu_scope": _scope(plan, health, probe, on_gpus),
                "history": why or f"references learned from {len(comparable)} passing runs",
                "data": str(plan.data) if plan.data else None},
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


def _models(gpus: list[devices.Gpu], on_gpus: dict[int, devices.Gpu]) -> dict[int | None, str | None]:
    """The model of each NVML GPU, and (key None) of the GPU the cases without a GPU index ran on:
    CUDA's GPU 0, or the node's one model when the probe did not say which GPU that was."""
    models: dict[int | None, str | None] = {g.index: g.name for g in gpus}
    names = {g.name for g in gpus if g.name}
    models[None] = on_gpus[0].name if 0 in on_gpus else (names.pop() if len(names) == 1 else None)
    return models


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


def _timed(name: str, timings: dict[str, float], run: Callable[[], CheckResult], watch: Watch) -> CheckResult:
    watch.status(f"{name} ...")
    t = time.monotonic()
    check = run()
    timings[name] = time.monotonic() - t
    watch.status(f"{name}: {check.status.word}" + (f" ({check.reason})" if check.reason else ""))
    return check


def _probe(
    plan: NodePlan, runner: Runner, qid: str, folder: Path, scratch: Path, prepare_error: str, watch: Watch,
) -> ProbeRun:
    wanted = micro.wanted_checks(plan.suite, plan.config.probe)
    if not wanted:
        return ProbeRun()
    if prepare_error:
        return ProbeRun(failure=prepare_error)
    watch.status(f"microbenchmarks ({', '.join(wanted)}) through the {runner.name} runner ...")
    t = time.monotonic()
    done: list[str] = []

    def progress(event: dict[str, Any]) -> None:
        if event.get("kind") == "device":
            watch.status(f"  probe on {event.get('device')} ({event.get('device_name')}), torch {event.get('torch')}")
        elif event.get("kind") == "timing":
            done.append(str(event.get("check")))
            watch.status(f"  [{len(done)}/{len(wanted)}] {event.get('check')} done in {event.get('seconds', 0):.1f} s")
        elif event.get("kind") == "result":
            performance, sanity = event["performance"], event["sanity"]
            watch.detail(f"    {event.get('metric')}: {text.number(performance['value'])} {performance.get('unit')}"
                         + ("" if sanity["passed"] else f" WRONG RESULT ({sanity.get('detail')})"))

    probe = micro.run_probe(runner, suite=plan.suite, probe=plan.config.probe, workload=plan.workload, run_id=qid,
                            data_dir=plan.data or scratch, folder=folder / "probe", on_event=progress)
    elapsed = time.monotonic() - t
    watch.timings["probe_total"] = elapsed
    watch.timings["probe_startup"] = max(elapsed - sum(probe.timings.values()), 0.0)
    for name, seconds in probe.timings.items():
        watch.timings[name] = seconds
    return probe


def _throughput(
    plan: NodePlan, runner: Runner, qid: str, folder: Path, scratch: Path, kind: str, prepare_error: str,
    watch: Watch,
) -> CheckResult:
    if prepare_error:
        return CheckResult(name="throughput", kind="workload", status=Status.INCONCLUSIVE, sanity=Status.INCONCLUSIVE,
                           reasons=(prepare_error,), sanity_reasons=(prepare_error,))
    spec = plan.suite.device(kind).throughput  # type: ignore[arg-type]
    return _timed("throughput", watch.timings, lambda: throughput_check(
        runner, workload=plan.workload, spec=spec, run_id=qid, data_dir=plan.data, scratch=scratch,
        folder=folder / "throughput"), watch)


def _inference(plan: NodePlan, runner: Runner, qid: str, folder: Path, spec: InferenceSpec,
               watch: Watch) -> CheckResult:
    return _timed("inference", watch.timings, lambda: inference_check(
        runner, spec=spec, roots=plan.inference_roots, run_id=qid, folder=folder / "inference",
        status=watch.status), watch)


def _time_to_train(
    plan: NodePlan, runner: Runner, results_dir: Path, prepare_error: str, watch: Watch,
) -> tuple[CheckResult, str | None]:
    from orchestrator.qualify.time_to_train import time_to_train_check

    spec = plan.suite.time_to_train
    assert spec is not None
    if prepare_error or plan.profiles is None:
        why = prepare_error or "no profiles (seeds.yaml) to run the time-to-train seed under"
        return CheckResult(name="time_to_train", kind="time_to_train", status=Status.INCONCLUSIVE,
                           sanity=Status.INCONCLUSIVE, reasons=(why,), sanity_reasons=(why,)), None
    watch.status(f"time_to_train: {plan.workload.name} seed {spec.seed}, profile {spec.profile} ...")
    t = time.monotonic()
    check, run_id = time_to_train_check(runner, workload=plan.workload, profiles=plan.profiles, spec=spec,
                                        store=Store(results_dir), data=plan.data, status=watch.detail)
    watch.timings["time_to_train"] = time.monotonic() - t
    watch.status(f"time_to_train: {check.status.word}" + (f" ({check.reason})" if check.reason else ""))
    return check, run_id


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
