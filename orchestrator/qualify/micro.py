"""Microbenchmarks: the probe (`orchestrator.qualify.probe`) run through the runner, its JSON lines
turned into checks (gemm, conv, memory, storage, nccl), each with its sanity part (it ran, its
results were correct, no error) kept apart from its numbers (judged later against references).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.config.workloads import Workload
from orchestrator.insight import resource_errors
from orchestrator.qualify.config import DeviceKind, Suite
from orchestrator.qualify.devices import Gpu, gpu_metric, split_metric
from orchestrator.qualify.jobs import StepError, StepOutcome, run_step
from orchestrator.results.qualification import CheckResult, Measurement, Status, finite
from orchestrator.runners.base import Runner

PROBE_FILE = Path(__file__).with_name("probe.py")
PREFIX = ":::PROBE "
SOURCE_ENV = "MLTRAIN_PROBE_SOURCE"
CONFIG_ENV = "MLTRAIN_PROBE_CONFIG"
BOOTSTRAP = ("python", "-c", f"import os;exec(compile(os.environ['{SOURCE_ENV}'],'mltrain-probe','exec'))")
"""How the probe runs anywhere: its source travels in the environment, so neither the workload's
image nor a Slurm node needs a copy of the orchestrator."""
PROBE_CHECKS = ("gemm", "conv", "memory", "storage", "nccl")


@dataclass
class ProbeRun:
    """What the probe said, line by line."""

    device: dict[str, Any] = field(default_factory=dict)
    results: list[dict[str, Any]] = field(default_factory=list)
    skips: list[dict[str, Any]] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    outcome: StepOutcome | None = None
    failure: str = ""
    """Why the probe could not run at all (the runner refused it)."""
    on_event: Callable[[dict[str, Any]], None] = field(default=lambda event: None, repr=False)

    def observe(self, line: str) -> None:
        at = line.find(PREFIX)
        if at < 0:
            return
        try:
            event = json.loads(line[at + len(PREFIX):])
        except ValueError:
            return
        if not isinstance(event, dict):
            return
        self.on_event(event)
        kind = event.get("kind")
        if kind == "device":
            self.device = event
        elif kind == "result" and finite(event.get("value")) is not None:
            self.results.append(event)
        elif kind == "skip":
            self.skips.append(event)
        elif kind == "error":
            self.errors.append(event)
        elif kind == "timing" and finite(event.get("seconds")) is not None:
            self.timings[str(event.get("check"))] = float(event["seconds"])

    @property
    def device_kind(self) -> DeviceKind | None:
        kind = self.device.get("device")
        return kind if kind in ("cpu", "cuda") else None


def probe_config(suite: Suite, seed_threads: int | None = None) -> dict[str, Any]:
    """The probe's settings: both device kinds' (it picks the one it finds) and the order of checks."""
    config: dict[str, Any] = {"seconds_per_case": suite.probe_seconds_per_case, "order": list(PROBE_CHECKS)}
    for kind in ("cpu", "cuda"):
        device = suite.device(kind)  # type: ignore[arg-type]
        config[kind] = {name: getattr(device, name).model_dump(mode="json") for name in PROBE_CHECKS
                        if getattr(device, name) is not None}
    if seed_threads:
        config["threads"] = seed_threads
    return config


def wanted_checks(suite: Suite) -> list[str]:
    """Probe checks either device kind of the suite asks for."""
    return [name for name in PROBE_CHECKS if getattr(suite.cpu, name) is not None or getattr(suite.cuda, name)
            is not None]


def run_probe(
    runner: Runner, *, suite: Suite, workload: Workload, run_id: str, data_dir: Path, folder: Path,
    source: str | None = None, extra_env: dict[str, str] | None = None,
    on_event: Callable[[dict[str, Any]], None] = lambda event: None,
) -> ProbeRun:
    """Run the probe on ``runner``; a runner that refuses it is recorded, not raised."""
    probe = ProbeRun(on_event=on_event)
    env = {SOURCE_ENV: source if source is not None else PROBE_FILE.read_text(),
           CONFIG_ENV: json.dumps(probe_config(suite)), **(extra_env or {})}
    try:
        probe.outcome = run_step(
            runner, name="probe", run_id=run_id, workload=workload, command=BOOTSTRAP, env=env, data_dir=data_dir,
            folder=folder, timeout_s=suite.probe_timeout_minutes * 60, on_line=probe.observe,
        )
    except StepError as exc:
        probe.failure = str(exc)
    return probe


def probe_checks(probe: ProbeRun, suite: Suite, gpus: Mapping[int, Gpu] | None = None) -> list[CheckResult]:
    """One check per probe check the suite asks for, unjudged (measurements carry no reference yet).
    ``gpus``: CUDA index -> the NVML GPU it is, which names per-GPU cases by NVML's index."""
    return [_check(name, probe, suite, gpus or {}) for name in wanted_checks(suite)]


def _gpu_named(line: dict[str, Any], probe: ProbeRun, gpus: Mapping[int, Gpu]) -> tuple[str, str]:
    """(metric, GPU label) of a result or error line, named for the GPU that made it: a per-GPU case
    (``<metric>_gpu<i>``, i CUDA's index) as ``<metric>_gpu<NVML index>``; a case of cuda:0 keeps its
    name. The label is "" where the line is not one GPU's, ``cuda:<i>`` where NVML's GPU is unknown."""
    metric = str(line.get("metric"))
    base, cuda = split_metric(metric)
    if isinstance(line.get("gpu"), int) and not isinstance(line.get("gpu"), bool):
        cuda = line["gpu"]
    if cuda is None:
        return metric, gpus[0].label if probe.device_kind == "cuda" and 0 in gpus else ""
    gpu = gpus.get(cuda)
    return (gpu_metric(base, gpu.index), gpu.label) if gpu is not None else (metric, f"cuda:{cuda}")


def _measurement(result: dict[str, Any], probe: ProbeRun, gpus: Mapping[int, Gpu]) -> Measurement:
    metric, device = _gpu_named(result, probe, gpus)
    return Measurement(metric=metric, value=float(result["value"]), unit=str(result.get("unit", "")),
                       better="lower" if result.get("better") == "lower" else "higher",
                       detail=str(result.get("detail", "")), device=device)


def _on(line: dict[str, Any], probe: ProbeRun, gpus: Mapping[int, Gpu]) -> str:
    """A line's metric for a reason, with the GPU that made it."""
    metric, device = _gpu_named(line, probe, gpus)
    return f"{metric} on {device}" if device else metric


def _check(name: str, probe: ProbeRun, suite: Suite, gpus: Mapping[int, Gpu]) -> CheckResult:
    seconds = probe.timings.get(name, 0.0)

    def result(status: Status, reasons: list[str], **extra: Any) -> CheckResult:
        return CheckResult(name=name, kind="microbenchmark", status=status, sanity=status, reasons=tuple(reasons),
                           sanity_reasons=tuple(reasons), duration_s=seconds, **extra)

    if probe.failure:
        return result(Status.ERROR, [f"could not run the probe: {probe.failure}"])
    outcome = probe.outcome
    assert outcome is not None
    if probe.device_kind is None:
        return result(Status.ERROR, [f"the probe did not start: {_why(outcome)}"])
    if getattr(suite.device(probe.device_kind), name) is None:
        return result(Status.NOT_APPLICABLE, [f"the suite runs no {name} check on a {probe.device_kind} device"])
    results = [r for r in probe.results if r.get("check") == name]
    skips = {str(s.get("metric")): str(s.get("reason")) for s in probe.skips if s.get("check") == name}
    errors = [e for e in probe.errors if e.get("check") == name]
    facts = {"device": probe.device.get("device_name"), "device_kind": probe.device_kind,
             "output": str(outcome.output)}
    measurements = tuple(_measurement(r, probe, gpus) for r in results)
    failures = [f"{_on(r, probe, gpus)}: wrong result ({r.get('detail', '')})" for r in results
                if r.get("sane") is False]
    failures += [_error_reason(e, _on(e, probe, gpus)) for e in errors]
    if name not in probe.timings and not results and not errors:
        ended = "timed out" if outcome.timed_out else f"ended ({_why(outcome)})"
        return result(Status.ERROR, [f"the probe {ended} before the {name} check"], skipped=skips, facts=facts)
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


def _why(outcome: StepOutcome) -> str:
    if outcome.timed_out:
        return f"timed out after {outcome.seconds:.0f} s"
    errors = resource_errors.classify(outcome.text())
    if errors:
        return f"{errors[0].summary}: {errors[0].line[:160]}"
    code = outcome.exit.code
    tail = outcome.tail(1)
    return f"exit status {code}" + (f": {tail[:200]}" if tail else "") + (f" ({outcome.exit.detail})" if
                                                                         outcome.exit.detail else "")
