"""One `mltrain infer` run, top to bottom: the runner prepared, the smoke assets made or the user's
dataset checked (nothing is written before this passes), the run folder created and locked, the
harness job(s) run (one, or the Server search's trials and an accuracy job), LoadGen's files
moved into the MLPerf Inference layout, read into the record, the record saved.
"""

from __future__ import annotations

import shutil
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.errors import InfrastructureError, MltrainError, UsageError
from orchestrator.inference import data, logs, search
from orchestrator.inference.job import run_harness
from orchestrator.inference.plan import InferencePlan, check_smoke_model
from orchestrator.results import atomic
from orchestrator.results.inference import InferenceResult, InferenceRun, SearchTrial
from orchestrator.results.inference_run import StoredInference
from orchestrator.results.store import Store, now_iso
from orchestrator.runners.base import Runner
from orchestrator.runners.outcome import JobOutcome


@dataclass(frozen=True, kw_only=True)
class Inputs:
    """The model file and dataset a run uses, and what makes its accuracy target."""

    model_file: Path
    model_sha256: str
    data: Path
    extra_args: tuple[str, ...]
    target_percent: float
    smoke_note: str | None = None


class JobFailed(InfrastructureError):
    """A harness job crashed, was killed or ran out of time."""


def resolve_inputs(plan: InferencePlan, runner: Runner, status: Callable[[str], None]) -> Inputs:
    o = plan.options
    if plan.checked is None:  # the smoke profile: the harness makes its model and data once
        assets = data.ensure_smoke(runner, plan.harness, o.model, status)
        if assets.made_now:
            status(f"smoke {o.model} model and data made in {assets.seconds} s ({assets.folder})")
        model_file = assets.model_torch if o.backend == "torch" else assets.model_onnx
        checked = check_smoke_model(model_file, o.backend, assets.input_shape)
        return Inputs(model_file=model_file, model_sha256=checked.sha256, data=assets.data,
                      extra_args=assets.harness_args, target_percent=plan.facts.accuracy.fraction
                      * assets.reference_percent,
                      smoke_note=f"smoke model and data (trained here to {assets.reference_percent:.1f}% top-1),"
                                 " not the reference's")
    assert o.model_file is not None and o.data is not None
    status(data.check_dataset(runner, plan.harness, o.model, o.data))
    return Inputs(model_file=o.model_file, model_sha256=plan.checked.sha256, data=o.data, extra_args=(),
                  target_percent=plan.facts.accuracy.target)


def new_record(plan: InferencePlan, run_id: str, runner: Runner, inputs: Inputs, *, command: tuple[str, ...],
               system: dict[str, Any], provenance: dict[str, Any]) -> InferenceRun:
    o = plan.options
    return InferenceRun(
        run_id=run_id, model=o.model, harness=plan.harness.name, profile=o.profile, label=o.label,  # type: ignore[arg-type]
        scenario=o.scenario, backend=o.backend, device=o.device, accuracy_requested=plan.accuracy, count=o.count,
        time_s=plan.time_s, target_qps=plan.target(o.target_qps), target_latency_ms=plan.target(o.target_latency_ms),
        trace=o.trace, search=o.search, model_file=str(inputs.model_file), model_sha256=inputs.model_sha256,
        data_dir=str(inputs.data), runner=runner.name, host=socket.gethostname(), command=command,
        started_at=now_iso(), state="running", system=system, runner_provenance=provenance,
    )


class Jobs:
    """The harness jobs of one run, each in ``jobs/<name>`` (trials in ``search/trial_<n>``)."""

    def __init__(self, plan: InferencePlan, runner: Runner, handle: StoredInference, inputs: Inputs,
                 on_line: Callable[[str], None]) -> None:
        self.plan, self.runner, self.harness, self.handle, self.inputs = plan, runner, plan.harness, handle, inputs
        self.on_line = on_line

    def run(self, name: str, folder: Path, mode: str, target_qps: str | None = None) -> Path:
        """Run one job; its results folder. UsageError (exit 2) when the harness refused its input."""
        args = self.plan.harness_args(mode, target_qps=target_qps, extra=self.inputs.extra_args)
        outcome = run_harness(self.runner, self.harness, run_id=self.handle.record.run_id, name=name, args=args,
                              model=self.inputs.model_file, data_dir=self.inputs.data, folder=folder,
                              env={"MLTRAIN_PROFILE": self.plan.options.profile},
                              timeout_s=self.plan.rules.timeout_minutes * 60, on_line=self.on_line)
        _raise_for(outcome, name)
        return folder / "results"

    def trial(self, number: int, target_qps: float | None) -> SearchTrial:
        folder = self.handle.paths.trial(number)
        results = self.run(f"trial_{number}", folder, "performance",
                           target_qps=None if target_qps is None else f"{target_qps:g}")
        perf = logs.performance(results / "performance" / "run_1", "Server")
        qps = float(logs.read_facts(results)["user_conf"]["target_qps"])
        passed = perf.loadgen_valid if self.plan.options.profile == "mlperf" else bool(perf.latency_bound_met)
        return SearchTrial(number=number, target_qps=qps, valid=perf.loadgen_valid, passed=passed,
                           reasons=perf.loadgen_reasons,
                           completed_qps=perf.value, p99_ns=perf.latency.percentiles_ns.get("99.00"),
                           folder=str(folder.relative_to(self.handle.paths.root)))


def _raise_for(outcome: JobOutcome, name: str) -> None:
    if outcome.ok:
        return
    if outcome.refused:
        said = outcome.last_line()
        raise UsageError(said.removeprefix("inference: ") or f"the harness refused job {name} (exit 2)")
    raise JobFailed(f"harness job {name}: {outcome.why()} (all of it: {outcome.log})")


def measure(jobs: Jobs, plan: InferencePlan) -> tuple[Path, dict[str, Any], Any]:
    """Run the jobs and lay their files out; (the folder of the facts to report, those facts, the search)."""
    paths = jobs.handle.paths
    found = None
    if plan.options.search:
        found = search.search(jobs.trial)
        best = paths.root / search.best_trial(found).folder / "results"
        with atomic.writing(paths.root):
            shutil.copytree(best / "performance", paths.root / "performance")
            shutil.copyfile(best / "user.conf", paths.root / "user.conf")
        main = best
        if plan.accuracy:
            main = jobs.run("accuracy", paths.job("accuracy"), "accuracy")
            _move(main / "accuracy", paths.accuracy)
        return main, logs.read_facts(main), found
    main = jobs.run("main", paths.job("main"), "both" if plan.accuracy else "performance")
    for part in ("performance", "accuracy", "trace", "user.conf"):
        if (main / part).exists():
            _move(main / part, paths.root / part)
    return main, logs.read_facts(main), found


def _move(source: Path, target: Path) -> None:
    atomic.make_folder(target.parent)
    atomic.move(source, target)


def result_of(plan: InferencePlan, inputs: Inputs, root: Path, facts_folder: Path, facts_json: dict[str, Any],
              found: Any) -> InferenceResult:
    perf = logs.performance(root / "performance" / "run_1", plan.options.scenario)
    acc = logs.accuracy(root / "accuracy", plan.facts, inputs.target_percent) if plan.accuracy else None
    harness = logs.harness_record(facts_json, facts_folder)
    gaps = logs.official_gaps(perf, harness, plan.facts, acc)
    if inputs.smoke_note:
        gaps.append(inputs.smoke_note)
    reasons = [f"LoadGen: {why}" for why in perf.loadgen_reasons] or (["LoadGen: INVALID"] if not perf.loadgen_valid
                                                                       else [])
    reasons += [f"official: {gap}" for gap in gaps]
    if acc is not None and not acc.met:
        reasons.append(f"accuracy {acc.percent:.3f}% < target {acc.target_percent:.3f}%")
    valid = perf.loadgen_valid and not gaps and acc is not None and acc.met
    return InferenceResult(valid=valid, reasons=tuple(reasons), official_gaps=tuple(gaps), performance=perf,
                           accuracy=acc, harness=harness, trace=logs.trace_summary(facts_json), search=found)


def run_inference(plan: InferencePlan, runner: Runner, *, results_root: Path, run_id: str, command: tuple[str, ...],
                  system: Callable[[Path], dict[str, Any]], status: Callable[[str], None],
                  on_line: Callable[[str], None]) -> InferenceRun:
    """Run the plan; the stored record (state finished), or raise with the record saved as it ended."""
    provenance = runner.prepare(plan.harness)
    inputs = resolve_inputs(plan, runner, status)
    record = new_record(plan, run_id, runner, inputs, command=command, system=system(inputs.data),
                        provenance=provenance)
    handle = Store(results_root).create_inference(record)
    try:
        jobs = Jobs(plan, runner, handle, inputs, on_line)
        status(f"{run_id}: {plan.options.model} {plan.options.scenario} on {runner.name}")
        folder, facts_json, found = measure(jobs, plan)
        result = result_of(plan, inputs, handle.paths.root, folder, facts_json, found)
        handle.save(record.model_copy(update={"state": "finished", "ended_at": now_iso(), "result": result}))
        if handle.index_note:
            status(handle.index_note)
        return handle.record
    except UsageError:
        handle.discard()  # the harness refused the input: the run produced nothing
        raise
    except KeyboardInterrupt:
        handle.save(record.model_copy(update={"state": "interrupted", "ended_at": now_iso()}))
        raise
    except MltrainError as exc:
        handle.save(record.model_copy(update={"state": "failed", "ended_at": now_iso(), "failure": str(exc)}))
        raise
    finally:
        handle.close()
