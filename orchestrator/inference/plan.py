"""What `mltrain infer` will do, decided before anything runs: the model's declaration, the
profile's rules, the options checked against both, the user's model file checked (`model_check`).
Every refusal is one line, exit 2, nothing written."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from orchestrator.config.labels import check_label
from orchestrator.errors import DataError, UsageError
from orchestrator.inference.declaration import Harness, InputFacts, ModelFacts, ProfileRules, find_model
from orchestrator.inference.model_check import MAX_BATCH, CheckedModel, check_model
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
    """The user's model file as checked; None for the smoke profile (made, then checked, later)."""

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
        if self.checked is None or o.trust_model:  # the smoke model is made here; else the user vouched for it
            args.append("--trust-model")
        return [*args, *extra]


def plan_inference(options: InferenceOptions, roots: Sequence[Path]) -> InferencePlan:
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
    if o.profile == "smoke":
        if not facts.smoke:
            raise UsageError(f"{o.model} has no smoke model: give --model and --data with --profile qualify")
        if o.model_file is not None or o.data is not None:
            raise UsageError("--profile smoke runs the smoke model on its own data: drop --model and --data "
                             "(or use --profile qualify)")
        return InferencePlan(options=o, harness=harness, facts=facts, rules=rules, checked=None)
    model_hint, data_hint = (f" ({text})" if (text := facts.how_to_get_the(part)) else ""
                             for part in ("model", "data"))
    if o.model_file is None:
        raise UsageError(f"--profile {o.profile} needs the model file: --model FILE{model_hint}")
    if o.data is None:
        raise DataError(f"--profile {o.profile} needs the dataset: --data DIR{data_hint}")
    checked = check_model(o.model_file, o.backend, facts.input, trusted=o.trust_model)
    if not o.data.is_dir():
        what = "no such folder" if not o.data.exists() else "not a folder"
        raise DataError(f"--data {o.data}: {what}{data_hint}")
    return InferencePlan(options=replace(o, model_file=o.model_file.resolve(), data=o.data.resolve()),
                         harness=harness, facts=facts, rules=rules, checked=checked)


def check_smoke_model(path: Path, backend: str, shape: tuple[int, int, int]) -> CheckedModel:
    return check_model(path, backend, InputFacts(shape=shape), trusted=True)  # made by the harness, here


def _number(option: str, text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise UsageError(f"{option} {text!r}: give a number or auto") from None
