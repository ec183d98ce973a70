"""Microbenchmarks: the probe (workloads/common/probe/, shipped with the workloads) run through the
runner as the command ``qualify.yaml`` names, its lines (`probe_lines`) turned into checks (gemm,
conv, memory, storage, nccl).

Sanity and performance stay apart, as in ReFrame: a check's sanity is whether each case computed
the right thing and none raised (a wrong result FAILs it whatever its speed, and its number is not a
measurement: nothing judges the speed of a wrong answer); its measurements are the numbers of the
cases that were right, judged later against references (`judge`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from orchestrator.config.workloads import Workload
from orchestrator.errors import MltrainError
from orchestrator.qualify.config import ProbeSettings, Suite
from orchestrator.qualify.devices import Gpu, gpu_metric, split_metric
from orchestrator.qualify.probe_lines import CaseResult, ProbeRun
from orchestrator.results.qualification import CheckResult, Measurement, Status
from orchestrator.runners import resource_errors
from orchestrator.runners.base import JobSpec, Runner
from orchestrator.runners.jobs import run_job

CONFIG_ENV = "MLTRAIN_PROBE_CONFIG"
"""Where the probe reads its settings (JSON): workloads/common/probe/settings.py."""


def probe_config(suite: Suite, checks: tuple[str, ...]) -> dict[str, Any]:
    """The probe's settings: both device kinds' (it picks the one it finds) and the order of checks."""
    config: dict[str, Any] = {"seconds_per_case": suite.probe_seconds_per_case, "order": list(checks)}
    for kind in ("cpu", "cuda"):
        device = suite.device(kind)  # type: ignore[arg-type]
        config[kind] = {name: getattr(device, name).model_dump(mode="json") for name in checks
                        if getattr(device, name) is not None}
    return config


def wanted_checks(suite: Suite, probe: ProbeSettings) -> list[str]:
    """The probe's checks that either device kind of the suite gives settings, in the probe's order."""
    return [name for name in probe.checks
            if getattr(suite.cpu, name) is not None or getattr(suite.cuda, name) is not None]


def run_probe(
    runner: Runner, *, suite: Suite, probe: ProbeSettings, workload: Workload, run_id: str, data_dir: Path,
    folder: Path, on_event: Callable[[dict[str, Any]], None] = lambda event: None,
) -> ProbeRun:
    """Run the probe on ``runner`` as a step of qualification ``run_id`` (in ``folder``): a job whose
    command is the one qualify.yaml names. A runner that refuses it, or cannot start it, is recorded,
    not raised."""
    run = ProbeRun(on_event=on_event)
    spec = JobSpec(kind="step", name="probe", run_id=run_id, bundle=workload, command=probe.command,
                   args=(str(probe.seed),), env={CONFIG_ENV: json.dumps(probe_config(suite, probe.checks))},
                   data_dir=data_dir, folder=folder, declared="the probe's command (qualify.yaml `probe:`)")
    try:
        run.outcome = run_job(runner, spec, timeout_s=suite.probe_timeout_minutes * 60, on_line=run.observe)
    except MltrainError as exc:
        run.failure = str(exc)
    return run


def probe_checks(
    probe: ProbeRun, suite: Suite, settings: ProbeSettings, gpus: Mapping[int, Gpu] | None = None,
) -> list[CheckResult]:
    """One check per probe check the suite asks for, unjudged (measurements carry no reference yet).
    ``gpus``: CUDA index -> the NVML GPU it is, which names per-GPU cases by NVML's index."""
    return [_check(name, probe, suite, gpus or {}) for name in wanted_checks(suite, settings)]


def _gpu_named(metric: str, gpu: Any, probe: ProbeRun, gpus: Mapping[int, Gpu]) -> tuple[str, str]:
    """(metric, GPU label) of a case, named for the GPU that ran it: a per-GPU case (``<metric>_gpu<i>``
    or ``gpu`` i, CUDA's index) as ``<metric>_gpu<NVML index>``; a case of cuda:0 keeps its name. The
    label is "" where the case is not one GPU's, ``cuda:<i>`` where NVML's GPU is unknown."""
    base, cuda = split_metric(metric)
    if isinstance(gpu, int) and not isinstance(gpu, bool):
        cuda = gpu
    if cuda is None:
        return metric, gpus[0].label if probe.device_kind == "cuda" and 0 in gpus else ""
    found = gpus.get(cuda)
    return (gpu_metric(base, found.index), found.label) if found is not None else (metric, f"cuda:{cuda}")


def _measurement(result: CaseResult, probe: ProbeRun, gpus: Mapping[int, Gpu]) -> Measurement:
    """A right case's performance, as a measurement to judge."""
    metric, device = _gpu_named(result.metric, result.gpu, probe, gpus)
    performance = result.performance
    return Measurement(metric=metric, value=performance.value, unit=performance.unit, better=performance.better,
                       detail=performance.detail, device=device)


def _on(metric: str, gpu: Any, probe: ProbeRun, gpus: Mapping[int, Gpu]) -> str:
    """A case's metric for a reason, with the GPU that ran it."""
    named, device = _gpu_named(metric, gpu, probe, gpus)
    return f"{named} on {device}" if device else named


def _check(name: str, probe: ProbeRun, suite: Suite, gpus: Mapping[int, Gpu]) -> CheckResult:
    seconds = probe.timings.get(name, 0.0)

    def result(status: Status, reasons: list[str], **extra: Any) -> CheckResult:
        return CheckResult(name=name, kind="microbenchmark", status=status, sanity=status, reasons=tuple(reasons),
                           sanity_reasons=tuple(reasons), duration_s=seconds, **extra)

    if probe.failure:
        return result(Status.INCONCLUSIVE, [f"could not run the probe: {probe.failure}"])
    outcome = probe.outcome
    assert outcome is not None
    if probe.device_kind is None:
        return result(Status.INCONCLUSIVE, [f"the probe did not start: {outcome.why()}"])
    if probe.protocol_mismatch:
        return result(Status.INCONCLUSIVE, [probe.protocol_mismatch])
    if getattr(suite.device(probe.device_kind), name) is None:
        return result(Status.NOT_APPLICABLE, [f"the suite runs no {name} check on a {probe.device_kind} device"])
    results = [r for r in probe.results if r.check == name]
    skips = {str(s.get("metric")): str(s.get("reason")) for s in probe.skips if s.get("check") == name}
    errors = [e for e in probe.errors if e.get("check") == name]
    right = [r for r in results if r.sanity.passed]
    wrong = [r for r in results if not r.sanity.passed]
    facts: dict[str, Any] = {
        "device": probe.device.get("device_name"), "device_kind": probe.device_kind, "output": str(outcome.log),
        "sanity": {_gpu_named(r.metric, r.gpu, probe, gpus)[0]: r.sanity.detail for r in results},
    }
    if wrong:  # kept for the record, never judged: the speed of a wrong answer says nothing
        facts["wrong_results"] = {_gpu_named(r.metric, r.gpu, probe, gpus)[0]: {
            "value": r.performance.value, "unit": r.performance.unit} for r in wrong}
    measurements = tuple(_measurement(r, probe, gpus) for r in right)
    failures = [f"{_on(r.metric, r.gpu, probe, gpus)}: wrong result ({r.sanity.detail})" for r in wrong]
    failures += [_error_reason(e, _on(str(e.get("metric")), e.get("gpu"), probe, gpus)) for e in errors]
    if name not in probe.timings and not results and not errors:
        ended = "timed out" if outcome.timed_out else f"ended ({outcome.why()})"
        return result(Status.INCONCLUSIVE, [f"the probe {ended} before the {name} check"], skipped=skips, facts=facts)
    if failures:
        return result(Status.FAIL, failures, measurements=measurements, skipped=skips, facts=facts)
    if not results:
        reasons = sorted(set(skips.values())) or [f"the suite gives no {name} case for this device"]
        return result(Status.NOT_APPLICABLE, reasons, skipped=skips, facts=facts)
    return result(Status.PASS, [], measurements=measurements, skipped=skips, facts=facts)


def _error_reason(error: dict[str, Any], metric: str) -> str:
    text = str(error.get("error", ""))
    found = resource_errors.classify(text)
    summary = found[0].summary if found else ""
    return f"{metric}: {summary + ': ' if summary else ''}{text[:240]}"
