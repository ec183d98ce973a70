"""Inference latency: the inference harness's smoke model under the real LoadGen for a few seconds,
SingleStream (one sample per query: its 90th-percentile latency, MLPerf's metric) or Offline
(samples/s), through the same runner as the training checks, judged like
the workload throughput (the operator's references, the node's and the fleet's history).

The model and data are the harness's smoke assets (`orchestrator.inference.data.ensure_smoke`: made
once in mltrain's cache, about a minute), so every node times the same network on the same images
and its numbers compare across nights. LoadGen calls such a short test INVALID (MLPerf's minimum
duration is 10 minutes); that verdict is kept in the facts and does not judge the node: the check
times latency, it makes no MLPerf claim. A harness that refuses the suite's settings (exit 2: an
execution provider this node lacks) makes the check INCONCLUSIVE, a crash or a LoadGen error FAIL.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator.errors import ConfigError, MltrainError
from orchestrator.inference import data, logs
from orchestrator.inference.job import run_harness
from orchestrator.inference.plan import InferenceOptions, check_smoke_model, plan_inference
from orchestrator.qualify.checks.base import failed_job, job_facts, overran
from orchestrator.qualify.config import QualifyConfig
from orchestrator.results.qualification import CheckResult, Measurement, Status
from orchestrator.runners.base import Runner

if TYPE_CHECKING:
    from orchestrator.qualify.checks.inference import InferenceSpec

CHECK = "inference"
LATENCY_PERCENTILE = "90.00"
"""SingleStream's MLPerf metric: the 90th percentile of the query latencies."""


def _options(spec: InferenceSpec) -> InferenceOptions:
    """What `mltrain infer` would be given for the check: the smoke model, for a few seconds."""
    return InferenceOptions(model=spec.model, scenario=spec.scenario, profile="smoke", backend=spec.backend,
                            device=spec.device, time_s=spec.seconds)


def check_suites(config: QualifyConfig, roots: Sequence[Path], label: str) -> None:
    """Every inference check qualify.yaml sets, planned as it would run (the model declared by a
    harness, with a smoke model, its scenario, backend and device): ConfigError naming the suite and
    the device at load, not INCONCLUSIVE on every node once it runs."""
    for name, suite in config.suites.items():
        for kind in ("cpu", "cuda"):
            spec = suite.device(kind).settings(CHECK)  # type: ignore[arg-type]
            if spec is None:
                continue
            try:
                plan_inference(_options(spec), roots)  # type: ignore[arg-type]
            except MltrainError as exc:
                raise ConfigError(f"{label}: suites.{name}.{kind}.{CHECK}: {exc}") from None


def inference_check(
    runner: Runner, *, spec: InferenceSpec | None, roots: Sequence[Path], run_id: str, folder: Path,
    status: Callable[[str], None] = lambda _: None,
) -> CheckResult:
    def result(state: Status, reasons: list[str], **extra: Any) -> CheckResult:
        sanity = Status.PASS if state is Status.PASS else state
        return CheckResult(name=CHECK, kind="workload", status=state, sanity=sanity, reasons=tuple(reasons),
                           sanity_reasons=tuple(reasons) if sanity is not Status.PASS else (), **extra)

    if spec is None:
        return result(Status.NOT_APPLICABLE, ["the suite times no inference on this device"])
    options = _options(spec)
    try:
        plan = plan_inference(options, roots)
        runner.prepare(plan.harness)
        assets = data.ensure_smoke(runner, plan.harness, spec.model, status)
        model = assets.model_torch if spec.backend == "torch" else assets.model_onnx
        check_smoke_model(model, spec.backend, assets.input_shape)
    except MltrainError as exc:
        return result(Status.INCONCLUSIVE, [f"could not prepare the {spec.model} inference check: {exc}"])
    args = plan.harness_args("performance", extra=assets.harness_args)
    try:
        outcome = run_harness(runner, plan.harness, run_id=run_id, name=CHECK, args=args, model=model,
                              data_dir=assets.data, folder=folder, env={"MLTRAIN_PROFILE": "qualify"},
                              timeout_s=spec.timeout_minutes * 60, on_line=lambda line: None)
    except MltrainError as exc:
        return result(Status.INCONCLUSIVE, [f"could not run the {spec.model} inference check: {exc}"])
    facts: dict[str, Any] = {"model": spec.model, "scenario": spec.scenario, "backend": spec.backend,
                             "device": spec.device, "seconds": spec.seconds, **job_facts(outcome)}
    if not outcome.ok:  # the harness's crash says nothing about the node, the GPU's error does (`failed_job`)
        status, why = failed_job(outcome, "the inference harness",
                                 overran_why=overran(CHECK, spec.timeout_minutes * 60, " (timeout_minutes)"),
                                 settings=f"inference settings ({spec.model} {spec.scenario})", no_number="")
        return result(status, [why], facts=facts, duration_s=outcome.seconds)
    try:
        perf = logs.performance(folder / "results" / "performance" / "run_1", spec.scenario)
    except MltrainError as exc:  # its logs unreadable: the harness's fault, not the node's
        return result(Status.INCONCLUSIVE, [f"inference {spec.model}: {exc}"], facts=facts,
                      duration_s=outcome.seconds)
    facts["loadgen"] = {"valid": perf.loadgen_valid, "reasons": list(perf.loadgen_reasons), "queries": perf.queries}
    if perf.errors:
        return result(Status.FAIL, [f"inference {spec.model}: LoadGen logged errors: {'; '.join(perf.errors)[:300]}"],
                      facts=facts, duration_s=outcome.seconds)
    where = (f"{spec.model} {spec.scenario}, {spec.backend} on {spec.device},"
             f" {perf.queries} queries in {spec.seconds:g} s")
    if spec.scenario == "SingleStream":
        latency = perf.latency.percentiles_ns.get(LATENCY_PERCENTILE)
        measured = None if latency is None else Measurement(metric="inference_p90_ms", value=latency / 1e6, unit="ms",
                                                            better="lower", detail=where)
    else:
        measured = None if perf.value is None else Measurement(metric="inference_samples_per_s", value=perf.value,
                                                               unit="samples/s", detail=where)
    if measured is None:  # no number: nothing to judge the node by
        return result(Status.INCONCLUSIVE, [f"inference {spec.model}: LoadGen logged no {perf.metric}"], facts=facts,
                      duration_s=outcome.seconds)
    return result(Status.PASS, [], measurements=(measured,), facts=facts, duration_s=outcome.seconds)
