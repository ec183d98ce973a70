"""What `mltrain infer` will do, decided before anything runs: the model's declaration, the
profile's rules, the options checked against both, the user's model file checked (`model_check`).
Every refusal is one line, exit 2, nothing written."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from orchestrator.errors import DataError, UsageError
from orchestrator.inference.declaration import Harness, InputFacts, ModelFacts, ProfileRules, find_model
from orchestrator.inference.model_check import CheckedModel, check_model

BACKENDS = ("onnxruntime", "torch")
DEVICES = ("cpu", "cuda", "tensorrt")


@dataclass(frozen=True, kw_only=True)
class InferenceOptions:
    """What the user asked for (`mltrain infer` options)."""

    model: str
    scenario: str
    profile: str
    backend: str = "onnxruntime"
    device: str = "cpu"
    accuracy: bool = False
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


@dataclass(frozen=True, kw_only=True)
class InferencePlan:
    options: InferenceOptions
    harness: Harness
    facts: ModelFacts
    rules: ProfileRules
    checked: CheckedModel | None
    """The user's model file as checked; None for the smoke profile (made, then checked, later)."""

    @property
    def sample_shape(self) -> tuple[int, ...]:
        """One sample as the model file takes it (its fixed axes after the batch), else as declared."""
        dims = self.checked.input_shape[1:] if self.checked is not None else ()
        if len(dims) == len(self.facts.input.shape) and all(isinstance(d, int) and d > 0 for d in dims):
            return tuple(int(d) for d in dims)
        return self.facts.input.shape

    @property
    def accuracy(self) -> bool:
        return self.options.accuracy or self.rules.accuracy

    @property
    def time_s(self) -> float | None:
        return self.options.time_s if self.options.time_s is not None else self.rules.time_s

    def target(self, given: str | None) -> str | None:
        return given if given is not None else self.rules.target

    def harness_args(self, mode: str, *, target_qps: str | None = None, extra: Sequence[str] = ()) -> list[str]:
        """The harness's options for one job (`python -m workloads.inference`), besides model, data and out."""
        o = self.options
        args = ["--model-name", o.model, "--scenario", o.scenario, "--backend", o.backend, "--device", o.device,
                "--mode", mode, "--threads", str(o.threads)]
        qps = target_qps if target_qps is not None else self.target(o.target_qps)
        for flag, value in (("--count", o.count), ("--time", self.time_s),
                            ("--min-query-count", self.rules.min_query_count), ("--target-qps", qps),
                            ("--target-latency-ms", self.target(o.target_latency_ms)), ("--max-batch", o.max_batch)):
            if value is not None:
                args += [flag, f"{value:g}" if isinstance(value, float) else str(value)]
        if o.trace:
            args.append("--trace")
        return [*args, *extra]


def plan_inference(options: InferenceOptions, roots: Sequence[Path]) -> InferencePlan:
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
    if o.search and o.scenario != "Server":
        raise UsageError("--search finds the Server scenario's highest valid QPS: use it with --scenario Server")
    if o.search and o.target_qps not in (None, "auto"):
        raise UsageError("--search finds the target QPS itself: drop --target-qps")
    for name, value in (("--target-qps", o.target_qps), ("--target-latency-ms", o.target_latency_ms)):
        if value is not None and value != "auto" and not _positive(value):
            raise UsageError(f"{name} {value!r}: give a positive number or auto")
    if o.profile == "smoke":
        if not facts.smoke:
            raise UsageError(f"{o.model} has no smoke model: give --model and --data with --profile qualify")
        if o.model_file is not None or o.data is not None:
            raise UsageError("--profile smoke runs the smoke model on its own data: drop --model and --data "
                             "(or use --profile qualify)")
        return InferencePlan(options=o, harness=harness, facts=facts, rules=rules, checked=None)
    missing_inputs(o, facts)
    checked = check_model(o.model_file, o.backend, facts.input)
    return InferencePlan(options=replace(o, model_file=o.model_file.resolve(), data=o.data.resolve()),
                         harness=harness, facts=facts, rules=rules, checked=checked)


def missing_inputs(o: InferenceOptions, facts: ModelFacts) -> None:
    """Refuses, in one line, every input the run lacks (the model file, the dataset folder), each named
    with what is wrong, and then says how to get each of them."""
    problems, how = [], []
    if o.model_file is None:
        problems.append(f"--profile {o.profile} needs the model file: --model FILE")
    elif not o.model_file.is_file():
        problems.append(f"--model {o.model_file}: no such file")
    if problems:
        how.append(f"The {o.model} model: {facts.how_to_get.model.strip()}")
    if o.data is None:
        problems.append(f"--profile {o.profile} needs the dataset: --data DIR")
    elif not o.data.is_dir():
        problems.append(f"--data {o.data}: no such folder")
    if len(problems) > len(how):
        how.append(f"The {o.model} data: {facts.how_to_get.data.strip()}")
    if problems:
        error = UsageError if o.data is not None and o.data.is_dir() else DataError
        raise error("; ".join(problems), details="\n".join(how))


def check_smoke_model(path: Path, backend: str, shape: tuple[int, ...]) -> CheckedModel:
    return check_model(path, backend, InputFacts(shape=shape))


def _positive(text: str) -> bool:
    try:
        return float(text) > 0
    except ValueError:
        return False
