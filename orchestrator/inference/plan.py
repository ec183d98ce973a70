"""What `mltrain infer` will do, decided before anything runs: the model's declaration, the
profile's rules, the options checked against both, the user's model file checked (`model_check`).
Every refusal is one line, exit 2, nothing written."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from orchestrator.config.labels import check_label
from orchestrator.config.reading import not_a_file, not_a_folder
from orchestrator.errors import DataError, UsageError
from orchestrator.inference.declaration import Harness, InputFacts, ModelFacts, ProfileRules, find_model
from orchestrator.inference.model_check import MAX_BATCH, CheckedModel, check_model
from orchestrator.inference.trained import TrainedModel
from orchestrator.text import exact

BACKENDS = ("onnxruntime", "torch")
DEVICES = ("cpu", "cuda", "tensorrt")


@dataclass(frozen=True)
class Bound:
    """The range of one numeric option: what LoadGen can represent and any machine could use. What
    the machine the harness runs on can take (its CPUs, its memory for LoadGen's schedule and a
    batch) the harness checks there, before its test starts."""

    low: float
    high: float
    unit: str = ""

    def check(self, option: str, value: float) -> None:
        if not (math.isfinite(value) and self.low <= value <= self.high):
            unit = f" {self.unit}" if self.unit else ""
            raise UsageError(f"{option} {exact(value)}: give a number from {exact(self.low)} to "
                             f"{exact(self.high)}{unit}")


BOUNDS = {
    "--time": Bound(0.001, 86_400, "s"),  # LoadGen counts whole milliseconds; a day is longer than any test
    "--target-qps": Bound(0.001, 1e7, "queries/s"),  # one query every 1,000 s .. beyond any one node's rate
    "--target-latency-ms": Bound(0.001, 1e6, "ms"),  # 1 us .. 1,000 s a query
    "--max-batch": Bound(1, MAX_BATCH, "samples"),
    "--threads": Bound(0, 4096),  # 0: chosen by the harness; more than the largest nodes have CPUs
}
"""Every numeric option of `mltrain infer`, bounded (``--count`` by the model's dataset)."""


@dataclass(frozen=True, kw_only=True)
class InferenceOptions:
    """What the user asked for (`mltrain infer` options)."""

    model: str
    scenario: str
    profile: str
    backend: str = "onnxruntime"
    device: str = "cpu"
    accuracy: bool = False
    """--accuracy: the accuracy test after the performance test."""
    accuracy_only: bool = False
    """--accuracy-only: the accuracy test alone (what the reference's --accuracy runs)."""
    compliance: bool = False
    """--compliance: the model's MLPerf compliance tests after the run (TEST01 needs the accuracy run)."""
    count: int | None = None
    time_s: float | None = None
    target_qps: str | None = None
    target_latency_ms: str | None = None
    model_file: Path | None = None
    data: Path | None = None
    trace: bool = False
    search: bool = False
    max_batch: int | None = None
    threads: int = 0
    label: str | None = None
    trust_model: bool = False
    """--trust-model: the user vouches for a model file that runs code as it loads (a .pt2)."""


@dataclass(frozen=True, kw_only=True)
class InferencePlan:
    options: InferenceOptions
    harness: Harness
    facts: ModelFacts
    rules: ProfileRules
    checked: CheckedModel | None
    """The user's model file as checked; None where the model is made later (the smoke model, a training
    run's export), then checked."""
    trained: TrainedModel | None = None
    """The training run whose trained model the run uses (``--model RUN``)."""

    def sample_shape(self, checked: CheckedModel | None = None) -> tuple[int, ...]:
        """One sample as the model file takes it (its fixed axes after the batch), else as declared."""
        checked = checked or self.checked
        dims = checked.input_shape[1:] if checked is not None else ()
        if len(dims) == len(self.facts.input.shape) and all(isinstance(d, int) and d > 0 for d in dims):
            return tuple(int(d) for d in dims)
        return self.facts.input.shape

    @property
    def accuracy(self) -> bool:
        return self.options.accuracy or self.options.accuracy_only or self.options.compliance or self.rules.accuracy

    @property
    def tests(self) -> tuple[str, ...]:
        """LoadGen's tests in order: ('performance',), ('performance', 'accuracy') or ('accuracy',)."""
        if self.options.accuracy_only:
            return ("accuracy",)
        return ("performance", "accuracy") if self.accuracy else ("performance",)

    @property
    def mode(self) -> str:
        """The harness's --mode for ``tests``."""
        return {("accuracy",): "accuracy", ("performance", "accuracy"): "both"}.get(self.tests, "performance")

    @property
    def time_s(self) -> float | None:
        return self.options.time_s if self.options.time_s is not None else self.rules.time_s

    def target(self, given: str | None) -> str | None:
        return given if given is not None else self.rules.target

    def harness_args(self, mode: str, *, target_qps: str | None = None, target_latency_ms: str | None = None,
                     extra: Sequence[str] = ()) -> list[str]:
        """The harness's options for one job (`python -m workloads.inference`), besides model, data and out."""
        o = self.options
        args = ["--model-name", o.model, "--scenario", o.scenario, "--backend", o.backend, "--device", o.device,
                "--mode", mode, "--threads", str(o.threads)]
        qps = target_qps if target_qps is not None else self.target(o.target_qps)
        latency = target_latency_ms if target_latency_ms is not None else self.target(o.target_latency_ms)
        for flag, value in (("--count", o.count), ("--time", self.time_s),
                            ("--min-query-count", self.rules.min_query_count), ("--target-qps", qps),
                            ("--target-latency-ms", latency), ("--max-batch", o.max_batch)):
            if value is not None:
                args += [flag, f"{value:g}" if isinstance(value, float) else str(value)]
        if o.trace:
            args.append("--trace")
        if self.rules.accuracy_reference == "model" and mode != "performance":
            args.append("--reference-accuracy")
        if self.checked is None or o.trust_model:  # the smoke model, a training run's export: made here
            args.append("--trust-model")
        return [*args, *extra]


def plan_inference(options: InferenceOptions, roots: Sequence[Path],
                   trained: TrainedModel | None = None) -> InferencePlan:
    """``trained``: the training run ``--model`` named, found (`trained.find_trained`)."""
    check_label(options.label)
    harness = find_model(roots, options.model)
    facts = harness.model(options.model)
    rules = harness.profiles[options.profile]  # type: ignore[index]
    o = options
    if o.scenario not in facts.scenarios:
        raise UsageError(f"--scenario {o.scenario}: {o.model} runs {', '.join(facts.scenarios)}")
    if o.backend not in BACKENDS:
        raise UsageError(f"--backend {o.backend!r}: one of {', '.join(BACKENDS)}")
    if o.device not in DEVICES:
        raise UsageError(f"--device {o.device!r}: one of {', '.join(DEVICES)}")
    if o.device == "tensorrt" and o.backend != "onnxruntime":
        raise UsageError("--device tensorrt is ONNX Runtime's TensorRT execution provider: use --backend onnxruntime")
    if not rules.overrides_allowed and (o.time_s is not None or o.count is not None):
        raise UsageError(f"--profile {o.profile} runs mlperf.conf's settings: drop --time and --count "
                         "(or use --profile qualify)")
    if o.accuracy_only and (o.accuracy or o.search):
        raise UsageError("--accuracy-only runs the accuracy test alone: drop --accuracy and --search "
                         "(--accuracy runs the performance test, then the accuracy test)")
    if o.accuracy_only and o.profile == "mlperf":
        raise UsageError("--profile mlperf runs the performance test, then the accuracy test, as a result needs both: "
                         "drop --accuracy-only (or use --profile qualify)")
    if o.compliance and (o.accuracy_only or o.search):
        raise UsageError("--compliance runs the compliance tests after a run's performance and accuracy tests: "
                         "drop --accuracy-only and --search")
    if o.compliance and not facts.submission.tests:
        raise UsageError(f"--compliance: {o.model} needs no compliance test (its inference.yaml lists none)")
    if o.search and o.scenario != "Server":
        raise UsageError("--search finds the Server scenario's highest valid QPS: use it with --scenario Server")
    if o.search and o.target_qps not in (None, "auto"):
        raise UsageError("--search finds the target QPS itself: drop --target-qps")
    for name, value in (("--target-qps", o.target_qps), ("--target-latency-ms", o.target_latency_ms)):
        if value is not None and value != "auto":
            BOUNDS[name].check(name, _number(name, value))
    for name, given in (("--time", o.time_s), ("--max-batch", o.max_batch), ("--threads", o.threads)):
        if given is not None:
            BOUNDS[name].check(name, given)
    if o.count is not None:
        Bound(1, facts.dataset.samples, f"samples ({facts.dataset.name})").check("--count", o.count)
    if trained is not None and trained.feeds != o.model:
        raise UsageError(f"--model {trained.run_id}: its {trained.workload.name} model is exported as {trained.feeds}, "
                         f"not {o.model}")
    if o.profile == "smoke":
        if not facts.smoke:
            raise UsageError(f"{o.model} has no smoke model: give --model and --data with --profile qualify")
        if o.data is not None:
            raise UsageError("--profile smoke runs on its own data with its own model, a training run's or a file's: "
                             "drop --data (or use --profile qualify)")
        if o.model_file is not None:
            if (wrong := not_a_file(o.model_file)) is not None:
                raise UsageError(f"--model {o.model_file}: {wrong}")
            checked = check_model(o.model_file, o.backend, facts.input, trusted=o.trust_model)
            return InferencePlan(options=replace(o, model_file=o.model_file.resolve()), harness=harness, facts=facts,
                                 rules=rules, checked=checked)
        return InferencePlan(options=o, harness=harness, facts=facts, rules=rules, checked=None, trained=trained)
    missing_inputs(o, facts, model_given=trained is not None)
    assert o.data is not None
    if trained is not None:
        return InferencePlan(options=replace(o, data=o.data.resolve()), harness=harness, facts=facts, rules=rules,
                             checked=None, trained=trained)
    assert o.model_file is not None
    checked = check_model(o.model_file, o.backend, facts.input, trusted=o.trust_model)
    return InferencePlan(options=replace(o, model_file=o.model_file.resolve(), data=o.data.resolve()),
                         harness=harness, facts=facts, rules=rules, checked=checked)


def missing_inputs(o: InferenceOptions, facts: ModelFacts, *, model_given: bool = False) -> None:
    """Refuses, in one line, every input the run lacks (the model file, the dataset folder), each named
    with what is wrong, and then says how to get each of them. ``model_given``: a training run's."""
    problems, how = [], []
    if model_given:
        pass
    elif o.model_file is None:
        problems.append(f"--profile {o.profile} needs the model file: --model FILE")
    elif (wrong := not_a_file(o.model_file)) is not None:
        problems.append(f"--model {o.model_file}: {wrong}")
    if problems:
        how.append(f"The {o.model} model: {facts.how_to_get.model.strip()}")
    if o.data is None:
        problems.append(f"--profile {o.profile} needs the dataset: --data DIR")
    elif (wrong := not_a_folder(o.data)) is not None:
        problems.append(f"--data {o.data}: {wrong}")
    if len(problems) > len(how):
        how.append(f"The {o.model} data: {facts.how_to_get.data.strip()}")
    if problems:
        error = UsageError if o.data is not None and o.data.is_dir() else DataError
        raise error("; ".join(problems), details="\n".join(how))


def check_smoke_model(path: Path, backend: str, shape: tuple[int, ...]) -> CheckedModel:
    return check_model(path, backend, InputFacts(shape=shape), trusted=True)  # made here, by the harness


def check_exported(path: Path, backend: str, declared: InputFacts) -> CheckedModel:
    """A training run's exported model, made here by the workload's export: trusted as the smoke model
    is (its window its own where the model slides one: `model_check.own_window`)."""
    return check_model(path, backend, declared, trusted=True)


def _number(option: str, text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise UsageError(f"{option} {text!r}: give a number or auto") from None
