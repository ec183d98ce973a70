"""Workload throughput: N timed steps of the workload's own throughput mode (workload.yaml
``throughput:``), through the same runner and image as `mltrain run`.

The workload prints a `resolved_settings` MLLOG event and one final `throughput` event (samples/s,
step-time percentiles, the loader's rate and whether the step waits on it); this module reads both
through the one MLLOG reader and turns them into a check. A node whose loader cannot keep up is
input-bound (a WARN naming both rates); an out-of-memory or other resource error is classified.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator import text
from orchestrator.config.workloads import Workload
from orchestrator.errors import MltrainError
from orchestrator.mlperf import mllog
from orchestrator.qualify.checks.base import failed_job, job_facts, overran
from orchestrator.results.qualification import CheckResult, Measurement, Status, finite
from orchestrator.runners.base import JobSpec, Runner
from orchestrator.runners.jobs import run_job
from orchestrator.runners.outcome import JobOutcome

if TYPE_CHECKING:
    from orchestrator.qualify.checks.throughput import ThroughputSpec

THROUGHPUT_KEY = "throughput"
RESOLVED_KEY = "resolved_settings"


@dataclass
class ThroughputLog:
    settings: dict[str, Any] = field(default_factory=dict)
    value: float | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    def observe(self, line: str) -> None:
        event = mllog.try_parse_line(line)
        if event is None:
            return
        if event.key == RESOLVED_KEY and isinstance(event.value, dict):
            self.settings = event.value
        elif event.key == THROUGHPUT_KEY and finite(event.value) is not None:
            self.value = float(event.value)
            self.metadata = dict(event.metadata)


def throughput_check(
    runner: Runner, *, workload: Workload, spec: ThroughputSpec | None, run_id: str, data_dir: Path | None,
    scratch: Path, folder: Path,
) -> CheckResult:
    def result(status: Status, reasons: list[str], **extra: Any) -> CheckResult:
        return CheckResult(name="throughput", kind="workload", status=status, sanity=status, reasons=tuple(reasons),
                           sanity_reasons=tuple(reasons), **extra)

    if workload.throughput is None:
        return result(Status.NOT_APPLICABLE,
                      [f"workload {workload.name} declares no throughput mode (workload.yaml `throughput:`)"])
    if spec is None:
        return result(Status.NOT_APPLICABLE, ["the suite times no workload throughput on this device"])
    env = {**spec.env, "STEPS": str(spec.steps), "WARMUP_STEPS": str(spec.warmup_steps)}
    log = ThroughputLog()
    job = JobSpec(kind="step", name="throughput", run_id=run_id, bundle=workload, command=workload.throughput,
                  env=env, data_dir=data_dir or scratch, folder=folder,
                  declared=f"{workload.folder / 'workload.yaml'} field throughput")
    try:
        outcome = run_job(runner, job, timeout_s=spec.timeout_minutes * 60, on_line=log.observe)
    except MltrainError as exc:
        return result(Status.INCONCLUSIVE, [f"could not run {workload.name}'s throughput mode: {exc}"])
    facts: dict[str, Any] = {"workload": workload.name, **job_facts(outcome), "env": env,
                             "resolved_settings": log.settings, "data": str(data_dir) if data_dir else None}
    if not outcome.ok or log.value is None:
        status, why = _failure(outcome, workload.name, spec)
        return result(status, [why], facts=facts, duration_s=outcome.seconds)
    meta = log.metadata
    facts["metadata"] = meta
    measurements = [Measurement(metric="throughput_samples_per_s", value=log.value, unit="samples/s",
                                detail=_detail(meta, log.settings))]
    step = finite(meta.get("step_ms_median"))
    if step is not None:
        measurements.append(Measurement(metric="step_ms_median", value=step, unit="ms", better="lower",
                                        detail=f"p10 {meta.get('step_ms_p10')} ms, p90 {meta.get('step_ms_p90')} ms"))
    tokens = finite(meta.get("tokens_per_second_per_device"))  # a language model's mode says these two
    if tokens is not None:
        measurements.append(Measurement(metric="tokens_per_s_per_device", value=tokens, unit="tokens/s",
                                        detail=f"sequence {meta.get('seq_len')}, {meta.get('layers')} layers"))
    mfu = finite(meta.get("mfu"))
    if mfu is not None:
        measurements.append(Measurement(metric="mfu", value=mfu, unit="of peak",
                                        detail=f"model FLOPs over a dense peak of {meta.get('peak_tflops')} TFLOPS"))
    loader = finite(meta.get("loader_samples_per_second"))
    reasons: list[str] = []
    status = Status.PASS
    if loader is not None:
        measurements.append(Measurement(metric="loader_samples_per_s", value=loader, unit="samples/s",
                                        detail="the input pipeline alone"))
        if meta.get("input_bound") is True or loader < log.value:
            status = Status.WARN
            reasons.append(f"input-bound: the loader delivers {text.number(loader)} samples/s, the steps consume"
                           f" {text.number(log.value)} samples/s (more loader workers or faster storage)")
    elif data_dir is None:
        facts["loader"] = "not measured: random in-memory batches (give --data to time the input pipeline)"
    return CheckResult(name="throughput", kind="workload", status=status, sanity=Status.PASS,
                       reasons=tuple(reasons), measurements=tuple(measurements), facts=facts,
                       duration_s=outcome.seconds)


def _detail(meta: dict[str, Any], settings: dict[str, Any]) -> str:
    parts = [f"{meta.get('steps', '?')} steps after {meta.get('warmup_steps', '?')} warm-up"]
    if meta.get("global_batch_size") is not None:
        parts.append(f"global batch {meta['global_batch_size']}")
    precision = meta.get("precision") or settings.get("precision")
    if precision:
        parts.append(str(precision))
    device = meta.get("device_name") or settings.get("device_name")
    if device:
        parts.append(str(device))
    return ", ".join(parts)


def _failure(outcome: JobOutcome, name: str, spec: ThroughputSpec) -> tuple[Status, str]:
    """The throughput mode's failure, judged by the one rule of a workload's job (`failed_job`)."""
    env = ", ".join(f"{k}={v}" for k, v in sorted(spec.env.items()))
    return failed_job(
        outcome, f"{name} throughput",
        overran_why=overran("throughput", spec.timeout_minutes * 60, f" ({name}'s throughput mode, timeout_minutes)"),
        settings=f"throughput settings (steps {spec.steps}{', env ' + env if env else ''})",
        no_number=(f"{name} throughput exited 0 without a final `throughput` MLLOG line holding a finite number:"
                   " the workload's fault, which says nothing about the node"))
