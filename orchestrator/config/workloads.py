"""The workload registry: every ``workloads/<name>/workload.yaml`` the orchestrator can run.

Adding a workload means adding a folder; nothing here names one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, field_validator, model_validator

from orchestrator.config.files import read_yaml, validated
from orchestrator.config.numbers import Positive
from orchestrator.errors import ConfigError, UsageError

DECLARATION = "workload.yaml"
Better = Literal["higher", "lower"]
"""Which way a quality metric improves: accuracy and Dice up, a loss or a word error rate down."""


class _Frozen(BaseModel):
    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid", allow_inf_nan=False)


class Quality(_Frozen):
    metric: str = "eval_accuracy"
    """MLLOG key compared with the target."""
    better: Better
    """higher: a run converges when the metric reaches the target or more; lower: the target or less."""
    target: Positive
    """Closed-division quality target."""
    env: str
    """Environment variable through which the target reaches run_and_time.sh."""


class DataDecl(_Frozen):
    cli: tuple[str, ...]
    """The workload's dataset command line (implements `synthesize` and `check`)."""
    how_to_get: str = ""
    """Where real data comes from; shown when a data folder is missing."""
    code: tuple[str, ...] = Field(default=("**/*",), min_length=1)
    """The files (globs in the workload's folder) whose contents make its synthetic data: with the
    profile's arguments they key the data made, so that data made by other code is never reused.
    Default: every file of the folder."""


class ExportDecl(_Frozen):
    """How a finished seed's trained model becomes an inference model (`mltrain export RUN --model`)."""

    cli: tuple[str, ...] = Field(min_length=1)
    """argv run where the seeds run, like the dataset command line; a seed's results folder and the
    model file to write (.onnx or .pt2) are appended."""
    feeds: str = Field(min_length=1)
    """The inference model (an inference.yaml's) the exported file is: `mltrain infer FEEDS --model RUN`."""


class ImageDecl(_Frozen):
    dockerfile: str
    """Dockerfile path, relative to the project root."""


class Workload(_Frozen):
    """What the orchestrator knows about one workload."""

    name: str
    mlperf_benchmark: str
    """The MLPerf Training benchmark it implements, as mlperf_logging names it (its rules:
    `orchestrator.mlperf.benchmarks`)."""
    ruleset: str | None = Field(default=None, pattern=r"^\d+\.\d+\.\d+$")
    """The mlperf_logging training ruleset its runs are checked and scored under; None: the
    benchmark's last (checked against the benchmark when a run is planned)."""
    description: str = ""
    run: tuple[str, ...]
    """argv of run_and_time.sh relative to the workload folder; the seed is appended."""
    throughput: tuple[str, ...] | None = None
    """argv of the throughput mode (`mltrain qualify`), relative to the workload folder; nothing is
    appended (STEPS, WARMUP_STEPS, DATADIR and the model knobs come in the environment). None: the
    workload has none, and its throughput check is not applicable."""
    quality: Quality
    samples_per_epoch: PositiveInt | None = None
    """Training samples in one epoch, where relevant: for a log that counts its progress in samples
    and states no samples_per_epoch (a log that states one is believed); it comes before the log's
    train_samples, whose meaning differs by benchmark."""
    data: DataDecl
    image: ImageDecl | None = None
    export: ExportDecl | None = None
    """None: its trained model is not exported."""
    compliance: bool = True
    """False: a workload that is no implementation of ``mlperf_benchmark`` (a model of one's own, a
    test double) opts out of that benchmark's compliance checker: its seeds' logs need only the keys
    a run is measured by (run_start, run_stop, the quality metric), their records carry no
    verdict, and it has no mlperf profile."""
    folder: Path = Field(default=Path("."), exclude=True)
    """The workload's folder (set on load)."""

    def data_argv(self) -> list[str]:
        """``data.cli`` runnable from any folder: a word naming a file of the workload's folder
        (``dataset.py``) becomes its absolute path; modules and programs stay as they are."""
        return [str(self.folder / word) if not word.startswith("-") and (self.folder / word).is_file() else word
                for word in self.data.cli]

    def data_code(self) -> list[Path]:
        """The files ``data.code`` names, in a stable order (compiled files left out); ConfigError
        when it names none."""
        found = {path for pattern in self.data.code for path in self.folder.glob(pattern)
                 if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"}
        if not found:
            raise ConfigError(f"{self.folder / DECLARATION}: data.code {list(self.data.code)} names no file of"
                              f" {self.folder}: name the files that make its synthetic data")
        return sorted(found)

    @model_validator(mode="before")
    @classmethod
    def _no_olympic(cls, data: object) -> object:
        if isinstance(data, dict) and "olympic" in data:
            raise ValueError("olympic: the runs and drops are MLPerf's rule for the benchmark, taken from"
                             " orchestrator/mlperf/benchmarks.py: remove the field")
        return data

    @field_validator("run", "throughput")
    @classmethod
    def _run_not_empty(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if value is not None and not value:
            raise ValueError("must name a command")
        return value


def load_workload(folder: Path) -> Workload:
    path = folder / DECLARATION
    raw = read_yaml(path)
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping of fields")
    workload = validated(Workload, {**raw, "folder": folder}, label=str(path))
    if workload.name != folder.name:
        raise ConfigError(f"{path}: name {workload.name!r} differs from its folder {folder.name!r}")
    return workload


class Registry:
    """The workloads found under one or more folders (earlier folders win on a name clash)."""

    def __init__(self, roots: list[Path]) -> None:
        self.roots = roots

    def names(self) -> list[str]:
        return sorted({p.parent.name for root in self.roots for p in root.glob(f"*/{DECLARATION}")})

    def get(self, name: str) -> Workload:
        if name and "/" not in name and not name.startswith("."):
            for root in self.roots:
                if (root / name / DECLARATION).is_file():
                    return load_workload(root / name)
        known = ", ".join(self.names()) or "none"
        raise UsageError(f"unknown workload {name!r}: known workloads are {known}")

    def for_benchmark(self, mlperf_benchmark: str) -> Workload:
        """The workload implementing an MLPerf benchmark (the project's own first, then others)."""
        found = [self.get(n) for n in self.names()]
        matches = [w for w in found if w.mlperf_benchmark == mlperf_benchmark]
        if not matches:
            known = ", ".join(sorted({w.mlperf_benchmark for w in found})) or "none"
            raise UsageError(f"no workload implements benchmark {mlperf_benchmark!r} (known: {known})")
        return sorted(matches, key=lambda w: w.folder.parent != self.roots[-1])[0]
