"""One `mltrain infer` run, top to bottom: the runner prepared, the smoke assets made or the user's
dataset checked (nothing is written before this passes), the run folder created and locked, the
harness job(s) run (one, or the Server search's trials and an accuracy job), LoadGen's files
moved into the MLPerf Inference layout, read into the record, the record saved.
"""

from __future__ import annotations

import shutil
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.errors import InfrastructureError, LogError, MltrainError, UsageError
from orchestrator.inference import compliance as verifying
from orchestrator.inference import data, logs, search
from orchestrator.inference.job import as_given, run_harness
from orchestrator.inference.logs import ACCURACY_LOG
from orchestrator.inference.plan import InferencePlan, check_exported, check_smoke_model
from orchestrator.inference.trained import export_trained, exported_path
from orchestrator.results import atomic
from orchestrator.results.inference import ComplianceTest, InferenceResult, InferenceRun, SearchTrial
from orchestrator.results.inference_run import StoredInference
from orchestrator.results.store import Store, now_iso
from orchestrator.runners.base import Runner
from orchestrator.runners.outcome import JobOutcome
from orchestrator.signals import stop_under_way


@dataclass(frozen=True, kw_only=True)
class Inputs:
    """The model file and dataset a run uses, and what makes its accuracy target."""

    model_file: Path
    model_sha256: str
    data: Path
    extra_args: tuple[str, ...]
    target_percent: float | None
    """The accuracy target; None: a fraction of the model's own accuracy, which the harness measures."""
    smoke_note: str | None = None
    model_source: str | None = None
    """The training run and seed the model was exported from."""


class JobFailed(InfrastructureError):
    """A harness job crashed, was killed or ran out of time."""


def resolve_inputs(plan: InferencePlan, runner: Runner, status: Callable[[str], None]) -> Inputs:
    """The model file (given; a training run's, exported now; or the smoke model) and the dataset the
    jobs read (prepared for that model where the harness prepares one)."""
    o = plan.options
    trained = plan.trained
    own_model = trained is None and plan.checked is None  # the smoke model itself
    smoke = data.ensure_smoke(runner, plan.harness, o.model, status, with_model=own_model) \
        if o.profile == "smoke" else None
    if smoke is not None and smoke.made_now:
        status(f"smoke {o.model} {'model and data' if own_model else 'data'} made in {smoke.seconds:.1f} s"
               f"{' (training included)' if own_model else ''} ({smoke.folder})")
    if trained is not None:
        suffix = ".pt2" if o.backend == "torch" else ".onnx"
        if trained.warning:
            status(f"warning: {trained.warning}")
        status(f"exporting the model {trained.source} trained ({trained.workload.name}) as {o.model}")
        model_file = export_trained(runner, trained, exported_path(plan.harness.name, trained, suffix), status)
        checked = check_exported(model_file, o.backend, plan.facts.input)
    elif plan.checked is not None:
        assert o.model_file is not None
        model_file, checked = o.model_file, plan.checked
    else:
        assert smoke is not None
        model_file = smoke.model_torch if o.backend == "torch" else smoke.model_onnx
        checked = check_smoke_model(model_file, o.backend, smoke.input_shape)
    given = smoke.data if smoke is not None else o.data
    assert given is not None
    prepared = data.prepare_dataset(runner, plan.harness, o.model, given, plan.sample_shape(checked), status,
                                    model_file=model_file if not checked.input_shape else None)
    target: float | None = plan.facts.accuracy.target
    note = None
    if plan.rules.accuracy_reference == "model":
        target = None  # the harness measures it: the file's own FP32 accuracy on the same samples
    if smoke is not None:
        what = "its smoke model" if own_model else (f"{trained.source}'s model" if trained is not None
                                                     else "the model given")
        note = (f"the smoke data with {what}, not the reference's, the target "
                f"{plan.facts.accuracy.fraction:.1%} of the model's own FP32 {plan.facts.accuracy.metric} on the same "
                "samples: comparable with nothing")
    return Inputs(model_file=model_file, model_sha256=checked.sha256, data=prepared.folder,
                  extra_args=smoke.harness_args if smoke is not None and own_model else (),
                  target_percent=target, smoke_note=note, model_source=trained.source if trained else None)


def new_record(plan: InferencePlan, run_id: str, runner: Runner, inputs: Inputs, *, command: tuple[str, ...],
               system: dict[str, Any], provenance: dict[str, Any]) -> InferenceRun:
    o = plan.options
    return InferenceRun(
        run_id=run_id, model=o.model, harness=plan.harness.name, profile=o.profile, label=o.label,  # type: ignore[arg-type]
        scenario=o.scenario, backend=o.backend, device=o.device, accuracy_requested=plan.accuracy,
        tests=plan.tests, count=o.count,
        time_s=plan.time_s, target_qps=plan.target(o.target_qps), target_latency_ms=plan.target(o.target_latency_ms),
        trace=o.trace, search=o.search, compliance=o.compliance, model_file=str(inputs.model_file),
        model_sha256=inputs.model_sha256,
        model_source=inputs.model_source,
        data_dir=str(inputs.data), runner=runner.name, host=socket.gethostname(), command=command,
        started_at=now_iso(), state="running", system=system, runner_provenance=provenance,
    )


HARNESS_WARNING = "inference: warning: "
"""How the harness starts a line the user must see (a test that will run long): shown as status."""


class Jobs:
    """The harness jobs of one run, each in ``jobs/<name>`` (trials in ``search/trial_<n>``)."""

    def __init__(self, plan: InferencePlan, runner: Runner, handle: StoredInference, inputs: Inputs,
                 on_line: Callable[[str], None], status: Callable[[str], None] = lambda _: None) -> None:
        self.plan, self.runner, self.harness, self.handle, self.inputs = plan, runner, plan.harness, handle, inputs
        self.detail, self.status = on_line, status

    def on_line(self, line: str) -> None:
        if line.startswith(HARNESS_WARNING):
            self.status("warning: " + line.removeprefix(HARNESS_WARNING))
        else:
            self.detail(line)

    def run(self, name: str, folder: Path, mode: str, target_qps: str | None = None,
            target_latency_ms: str | None = None, extra: Sequence[str] = ()) -> Path:
        """Run one job; its results folder. UsageError (exit 2) when the harness refused its input."""
        args = self.plan.harness_args(mode, target_qps=target_qps, target_latency_ms=target_latency_ms,
                                      extra=[*self.inputs.extra_args, *extra])
        outcome = run_harness(self.runner, self.harness, run_id=self.handle.record.run_id, name=name, args=args,
                              model=self.inputs.model_file, data_dir=self.inputs.data, folder=folder,
                              env={"MLTRAIN_PROFILE": self.plan.options.profile},
                              timeout_s=self.plan.rules.timeout_minutes * 60, on_line=self.on_line)
        if outcome.leftovers:
            self.status(f"warning: {outcome.leftover_note()}")
        _raise_for(outcome, name, self.inputs.model_file)
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


def _raise_for(outcome: JobOutcome, name: str, model: Path) -> None:
    if outcome.ok:
        return
    if outcome.refused:
        said = as_given(outcome.last_line(), model)
        raise UsageError(said.removeprefix("inference: ") or f"the harness refused job {name} (exit 2)")
    raise JobFailed(f"harness job {name}: {as_given(outcome.why(), model)} (all of it: {outcome.log})")


def measure(jobs: Jobs, plan: InferencePlan) -> tuple[Path, dict[str, Any], Any]:
    """Run the jobs and lay their files out; (the folder of the facts to report, those facts, the Server
    search or the compliance tests)."""
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
    main = jobs.run("main", paths.job("main"), plan.mode)
    for part in ("performance", "accuracy", "trace", "user.conf"):
        if (main / part).exists():
            _move(main / part, paths.root / part)
    facts = logs.read_facts(main)
    if plan.options.compliance:
        found = [compliance_test(jobs, plan, test, facts) for test in plan.facts.submission.tests]
    return main, facts, found


def compliance_test(jobs: Jobs, plan: InferencePlan, test: str, facts: dict[str, Any]) -> ComplianceTest:
    """Run compliance test ``test`` (its audit.config) with the run's user.conf values, lay its logs out
    as the submission layout's TESTxx folder, and verify it by MLCommons' rules."""
    paths = jobs.handle.paths
    given = facts.get("user_conf") or {}
    results = jobs.run(test, paths.job(test), "performance", extra=["--audit", test],
                       target_qps=f"{given['target_qps']:g}" if "target_qps" in given else None,
                       target_latency_ms=f"{given['target_latency']:g}" if "target_latency" in given else None)
    folder = paths.compliance(test)
    logged = results / "performance" / "run_1"
    if test == "TEST01":  # its sampled responses: the submission layout keeps them under accuracy/
        (folder / "accuracy").mkdir(parents=True, exist_ok=True)
        _move(logged / ACCURACY_LOG, folder / "accuracy" / ACCURACY_LOG)
        line = ((logs.read_facts(results).get("audit") or {}).get("accuracy")) or ""
        atomic.write_text(folder / "accuracy" / "accuracy.txt", line + "\n")
    _move(logged, folder / "performance" / "run_1")
    accuracy_passed = None
    if test == "TEST01":
        verdict = verifying.check_test01_accuracy(paths.accuracy / ACCURACY_LOG, folder / "accuracy" / ACCURACY_LOG,
                                            plan.facts.submission.response)
        atomic.write_text(folder / "verify_accuracy.txt", verdict.report)
        accuracy_passed = verdict.passed
        performance = verifying.check_test01_performance(paths.performance / logs.DETAIL,
                                                   folder / "performance" / "run_1" / logs.DETAIL)
    else:
        performance = verifying.check_test04_performance(paths.performance / "mlperf_log_summary.txt",
                                                   folder / "performance" / "run_1" / "mlperf_log_summary.txt")
    atomic.write_text(folder / "verify_performance.txt", performance.report)
    return ComplianceTest(test=test, accuracy_passed=accuracy_passed,  # type: ignore[arg-type]
                          performance_passed=performance.passed, folder=str(folder.relative_to(paths.root)))


def _move(source: Path, target: Path) -> None:
    atomic.make_folder(target.parent)
    atomic.move(source, target)


def target_of(plan: InferencePlan, inputs: Inputs, facts_json: dict[str, Any]) -> float:
    """The accuracy target: the model's declared one, or (``accuracy_reference: model``) its fraction of
    the model file's own FP32 accuracy on the same samples, as the harness measured it."""
    if inputs.target_percent is not None:
        return inputs.target_percent
    given = facts_json.get("reference_accuracy") or {}
    # as its script prints it, rounded as the run's own accuracy is: the same samples score the same
    reference = logs.line_percent(str(given.get("line") or ""))
    if reference is None or not 0 <= reference <= 100:
        raise LogError("harness.json: no reference_accuracy (the model's own accuracy the target is a fraction of)")
    return plan.facts.accuracy.fraction * float(reference)


def result_of(plan: InferencePlan, inputs: Inputs, root: Path, facts_folder: Path, facts_json: dict[str, Any],
              found: Any) -> InferenceResult:
    perf = logs.performance(root / "performance" / "run_1", plan.options.scenario) \
        if "performance" in plan.tests else None
    acc = logs.accuracy(root / "accuracy", plan.facts, target_of(plan, inputs, facts_json), facts_json) \
        if plan.accuracy else None
    harness = logs.harness_record(facts_json, facts_folder)
    gaps = logs.official_gaps(perf, harness, plan.facts, acc, (facts_json.get("round") or {}).get("name"))
    dataset_gap = (facts_json.get("dataset") or {}).get("gap")
    if dataset_gap:  # the harness says why its dataset is not the reference's
        gaps.append(str(dataset_gap))
    if inputs.smoke_note:
        gaps.append(inputs.smoke_note)
    if perf is None:
        reasons = ["no performance test (--accuracy-only)"]
    else:
        reasons = [f"LoadGen: {why}" for why in perf.loadgen_reasons] or (["LoadGen: INVALID"]
                                                                           if not perf.loadgen_valid else [])
    reasons += [f"official: {gap}" for gap in gaps]
    if acc is not None and not acc.met:
        reasons.append(f"accuracy {acc.percent:.3f}% < target {acc.target_percent:.3f}%")
    valid = perf is not None and perf.loadgen_valid and not gaps and acc is not None and acc.met
    tests = tuple(found) if isinstance(found, list) else ()
    for test in tests:
        checks = (("accuracy", test.accuracy_passed), ("performance", test.performance_passed))
        failed = [what for what, passed in checks if passed is False]
        if failed:
            reasons.append(f"compliance {test.test}: {' and '.join(failed)} check failed (see {test.folder})")
    valid = valid and all(t.accuracy_passed is not False and t.performance_passed for t in tests)
    return InferenceResult(valid=valid, reasons=tuple(reasons), official_gaps=tuple(gaps), performance=perf,
                           accuracy=acc, harness=harness, trace=logs.trace_summary(facts_json),
                           search=None if tests else found, compliance=tests)


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
        jobs = Jobs(plan, runner, handle, inputs, on_line, status)
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
    except Exception as exc:
        if stop_under_way() is not None:  # a library caught the stop and raised its own error
            handle.save(record.model_copy(update={"state": "interrupted", "ended_at": now_iso()}))
        else:  # never left 'running': what ended it is kept
            failure = str(exc) if isinstance(exc, MltrainError) else f"{type(exc).__name__}: {exc}"
            handle.save(record.model_copy(update={"state": "failed", "ended_at": now_iso(), "failure": failure}))
        raise
    finally:
        handle.close()
