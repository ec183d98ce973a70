"""What an inference harness declares (``workloads/<harness>/inference.yaml``): how to run it, its
dataset command line, its image, the profiles' LoadGen settings and its models' facts (dataset,
input, accuracy metric and target, scenarios). Typed and validated on load; the orchestrator names
no harness and no model: it finds them here.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from orchestrator.config.files import read_yaml, validated
from orchestrator.config.profiles import PROFILE_NAMES, ProfileName
from orchestrator.config.workloads import DataDecl, ImageDecl
from orchestrator.errors import ConfigError, UsageError

DECLARATION = "inference.yaml"
SCENARIOS = ("SingleStream", "MultiStream", "Server", "Offline")
Scenario = Literal["SingleStream", "MultiStream", "Server", "Offline"]


class _Frozen(BaseModel):
    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")


class DatasetFacts(_Frozen):
    name: str
    samples: int = Field(ge=1)
    """Samples of the full dataset: an accuracy run over fewer is not an MLPerf accuracy run."""


class InputFacts(_Frozen):
    shape: tuple[int, ...] = Field(min_length=3, max_length=4)
    """One sample, without the batch axis that comes first in the model file: (C, H, W) of an image,
    (C, D, H, W) of a volume."""
    min_opset: int = Field(default=7, ge=1)
    window: Literal["declared", "model"] = "declared"
    """model: the axes after the channels are the model file's own (a sliding window: the dataset is
    prepared for the file's window, and a run at another than the declared one says it is not the
    reference's); declared: the file takes ``shape``."""


class AccuracyFacts(_Frozen):
    metric: Literal["top1", "mAP", "DICE"]
    """DICE: the mean Dice, in percent like the others."""
    reference: float = Field(gt=0, le=100)
    """The reference FP32 model's accuracy, in percent."""
    fraction: float = Field(gt=0, le=1)
    """Of the reference accuracy that a valid run must reach (0.99: the 99% target)."""

    @property
    def target(self) -> float:
        return self.reference * self.fraction


class SubmissionFacts(_Frozen):
    """The model as MLCommons' submission checker knows it."""

    benchmark: str
    """Its benchmark name there (resnet, 3d-unet-99.9 ...): the results folder an export writes."""
    tests: tuple[Literal["TEST01", "TEST04"], ...] = ()
    """The compliance tests a closed result needs (the checker's models_TEST01, models_TEST04)."""
    response: Literal["byte", "float32", "int32", "int64"] = "float32"
    """What a response holds: TEST01 compares its first value with the accuracy run's (--dtype)."""


class HowToGet(_Frozen):
    """Where each input of a model comes from, said when one is missing."""

    model: str
    data: str


class ModelFacts(_Frozen):
    description: str = ""
    round: str | None = None
    """The MLPerf Inference round whose mlperf.conf gives every LoadGen setting (a retired model's last);
    None: the installed LoadGen's built-in mlperf.conf."""
    dataset: DatasetFacts
    input: InputFacts
    accuracy: AccuracyFacts
    scenarios: tuple[Scenario, ...] = Field(min_length=1)
    module: str = Field(pattern=r"^[a-z_][a-z0-9_]*$")
    """Its module in the harness's ``models/`` (the harness imports it; the orchestrator never does)."""
    smoke: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
    """The harness's module that makes a smoke model and data for it (`data.cli smoke MODEL OUT`); None:
    it has none."""
    how_to_get: HowToGet
    submission: SubmissionFacts


class ProfileRules(_Frozen):
    """What one profile asks of LoadGen."""

    time_s: float | None = Field(default=None, gt=0)
    """Test duration (LoadGen min and max duration) when --time is not given; None: mlperf.conf's."""
    min_query_count: int | None = Field(default=None, ge=1)
    """LoadGen's min_query_count (samples in Offline); None: mlperf.conf's."""
    target: Literal["auto"] | None = None
    """user.conf target QPS / latency when none is given: auto (the harness's warm-up) or mlperf.conf's."""
    accuracy: bool = False
    """The accuracy run is always made."""
    overrides_allowed: bool = True
    """--time and --count may change what mlperf.conf fixes."""
    accuracy_reference: Literal["published", "model"] = "published"
    """What the accuracy target is a fraction of: the model's published FP32 accuracy (inference.yaml), or
    the model file's own FP32 accuracy on the same samples, measured by the harness (MLPerf's definition of
    a reference accuracy, for a model that has none published: a smoke or trained model)."""
    timeout_minutes: float = Field(default=60, gt=0)


class Harness(_Frozen):
    name: str
    description: str = ""
    run: tuple[str, ...] = Field(min_length=1)
    data: DataDecl
    image: ImageDecl | None = None
    profiles: dict[ProfileName, ProfileRules]
    models: dict[str, ModelFacts] = Field(min_length=1)
    folder: Path = Field(default=Path("."), exclude=True)

    @field_validator("profiles")
    @classmethod
    def _every_profile(cls, value: dict[str, ProfileRules]) -> dict[str, ProfileRules]:
        missing = set(PROFILE_NAMES) - set(value)
        if missing:
            raise ValueError(f"missing profiles {sorted(missing)}")
        return value

    def model(self, name: str) -> ModelFacts:
        return self.models[name]


def load_harness(folder: Path) -> Harness:
    path = folder / DECLARATION
    raw = read_yaml(path)
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping of fields")
    harness = validated(Harness, {**raw, "folder": folder}, label=str(path))
    if harness.name != folder.name:
        raise ConfigError(f"{path}: name {harness.name!r} differs from its folder {folder.name!r}")
    return harness


def all_models(roots: Sequence[Path]) -> dict[str, Harness]:
    """Every inference model the harnesses under ``roots`` declare, with its harness (earlier roots win)."""
    found: dict[str, Harness] = {}
    for root in roots:
        for path in sorted(root.glob(f"*/{DECLARATION}")):
            harness = load_harness(path.parent)
            for model in harness.models:
                found.setdefault(model, harness)
    return found


def find_model(roots: Sequence[Path], model: str) -> Harness:
    """The harness declaring ``model`` (earlier roots win); UsageError naming the known models."""
    known: list[str] = []
    for root in roots:
        for path in sorted(root.glob(f"*/{DECLARATION}")):
            harness = load_harness(path.parent)
            if model in harness.models:
                return harness
            known += list(harness.models)
    raise UsageError(f"unknown inference model {model!r}: known models are {', '.join(sorted(set(known))) or 'none'}")
