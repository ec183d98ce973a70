"""The typed records mltrain keeps: the three files of a run folder (`Manifest`, `Summary`,
`SeedState`) here; what one run of a seed was (`RunRecord`, in `results.run_record`) and how a set of
runs scored (`Score`, in `results.scores`) are named here too, so that a record is imported from here.

Every stored file is validated when it is read (`orchestrator.results.store`), so a damaged or
foreign file is one error naming the file and the field, never a `KeyError` deep inside.
"""

from __future__ import annotations

from enum import Enum
from typing import Any, Literal

from pydantic import ConfigDict, Field, model_validator

from orchestrator.config.numbers import Finite, NonNegative, Positive
from orchestrator.config.profiles import ProfileName
from orchestrator.results.record_base import Record
from orchestrator.results.run_record import (
    INFRASTRUCTURE_FAULTS,
    MAX_RUN_MS,
    Compliance,
    EvalPoint,
    Exit,
    HostCause,
    NodeFacts,
    Placement,
    QuietHost,
    RunRecord,
    RunStatus,
    SeedEnergy,
)
from orchestrator.results.scores import Score, ScoringRule, SeedScore, Spread

__all__ = [
    "IMPORTED_RUNNER", "INFRASTRUCTURE_FAULTS", "MAX_RUN_MS", "Compliance", "EvalPoint", "Exit", "ExportedRun",
    "HostCause", "ImportedFolder", "Manifest", "MlcommonsCheck", "NodeFacts", "PackageCheck", "Placement", "QuietHost",
    "RcpCheck", "Record", "RunRecord", "RunState", "RunStatus", "Score", "ScoringRule", "SeedEnergy", "SeedScore",
    "SeedState", "SeedStateName", "Spread", "Summary",
]

IMPORTED_RUNNER = "imported"
"""The runner a run made elsewhere names (`mltrain import`)."""


# ---- the files of a run folder -------------------------------------------------------------

RunState = Literal["running", "finished", "incomplete", "interrupted"]


class SeedStateName(str, Enum):
    PENDING = "pending"
    RUNNING = "running"
    FINISHED = "finished"
    INTERRUPTED = "interrupted"


class SeedState(Record):
    """``seeds/<seed>/state.json``: where one seed is in its life."""

    seed: int = Field(ge=0)
    state: SeedStateName
    status: RunStatus | None = None
    """How the run ended (finished seeds)."""
    started_at: str | None = None
    ended_at: str | None = None
    source: str | None = None
    """The file an imported seed came from."""

    @property
    def finished(self) -> bool:
        return self.state is SeedStateName.FINISHED


class ImportedFolder(Record):
    """Where an imported run's logs came from, and the files MLCommons keeps beside them."""

    folder: str
    """The benchmark folder that held the result files (absolute)."""
    system: str | None = None
    """``<system>`` of ``results/<system>/<benchmark>/``, when the folder is laid out that way."""
    system_description: dict[str, Any] | None = None
    """``systems/<system>.json`` as found beside the results."""
    scaling_factor: Positive | None = None
    """``scaling.json``'s scaling_factor beside the results; None when there is none."""
    ruleset: str
    """The compliance ruleset the logs were checked and scored with."""
    files: dict[int, str] = Field(default_factory=dict)
    """Run number -> the file's name in the folder."""
    digest: str | None = None
    """sha256 of the result files (names and bytes) and scaling.json: the same logs, wherever they lie,
    are imported once. None in imports of an older mltrain."""
    exported_run: str | None = None
    """The run these logs were exported from, when they are an mltrain export (its ``mltrain.json``)."""


class ExportedRun(Record):
    """``mltrain.json`` beside an export's result files: the run they came from and how it is scored,
    so that importing the export tells the run's own story (its profile, target and rule)."""

    run_id: str = Field(min_length=1)
    workload: str = Field(min_length=1)
    profile: ProfileName
    metric: str
    target: Finite
    rule: ScoringRule
    seeds: dict[int, int] = Field(default_factory=dict)
    """result_<n>.txt -> the seed it holds."""
    mltrain: str = ""
    """The mltrain version that exported it."""


class Manifest(Record):
    """``manifest.json``: what was run, where, how, and with what (fixed before the first seed, but
    for the seeds of a run that decides its own seed count: they are added one at a time as its
    rule asks for them, see `orchestrator.results.decisions`)."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="allow")  # later versions may add fields

    run_id: str = Field(min_length=1)
    workload: str = Field(min_length=1)
    benchmark: str | None = None
    """The MLPerf benchmark name (mlperf_logging's), when the workload implements one."""
    profile: ProfileName
    mlperf_result: bool = False
    label: str | None = None
    seeds: tuple[int, ...] = Field(min_length=1)
    seeds_random: bool = False
    runner: str
    metric: str = "eval_accuracy"
    target: Finite
    rule: ScoringRule
    ruleset: str | None = None
    """The mlperf_logging ruleset the seeds' logs are checked under (the workload's); None in runs
    recorded before it was kept, which were checked under their benchmark's default."""
    timeout_minutes: Positive | None = None
    data_dir: str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    host: str = ""
    command: tuple[str, ...] = ()
    started_at: str
    ended_at: str | None = None
    state: RunState
    versions: dict[str, str] = Field(default_factory=dict)
    system: dict[str, Any] = Field(default_factory=dict)
    """The host, GPUs, storage and engine as `orchestrator.insight.sysinfo.capture` saw them."""
    runner_provenance: dict[str, Any] = Field(default_factory=dict)
    imported_from: str | None = None
    imported: ImportedFolder | None = None
    """What `mltrain import` read besides the logs (system description, scaling.json)."""

    @model_validator(mode="after")
    def _seeds_distinct(self) -> Manifest:
        if len(set(self.seeds)) != len(self.seeds):
            raise ValueError("seeds repeat")
        if any(s < 0 for s in self.seeds):
            raise ValueError("seeds must be >= 0")
        return self

    @property
    def setup_name(self) -> str:
        """How comparisons name this run: its label, else its id."""
        return self.label or self.run_id

    @property
    def made_elsewhere(self) -> bool:
        """An imported run (`mltrain import`; an older mltrain's imports name only their runner)."""
        return self.imported is not None or self.runner == IMPORTED_RUNNER


class RcpCheck(Record):
    """mlperf_logging's RCP checker on a set of runs: is their convergence plausible, and the
    scaling factor MLCommons derives from it."""

    state: Literal["pass", "fail", "no_rcp", "not_comparable", "not_applied"]
    """pass; fail; no_rcp: the ruleset's table has no point for this batch size; not_comparable: the
    log and the table count epochs in different units; not_applied: open division or too few runs."""
    detail: str
    """One plain sentence saying what happened."""
    checker_message: str = ""
    """The checker's own message ('RCP found', 'Missing RCP, please submit RCP with BS = 2', ...)."""
    batch_size: int | None = None
    table_batch_sizes: tuple[int, ...] = ()
    scaling_factor: Positive = 1.0
    """What the checker wrote into scaling.json (1.0: none)."""


class PackageCheck(Record):
    """mlperf_logging's package checker on the export."""

    passed: bool
    errors: tuple[str, ...] = ()
    """The first errors it logged, one line each."""


class MlcommonsCheck(Record):
    """What MLCommons' own tools said of the run: the result summarizer run on the run's source
    (the original folder of an import, the workload's own logs of a run), the RCP and package
    checkers, and the scaling factor."""

    folder: str
    """Where the MLCommons layout of this run is (the export of a run, the original folder of an import)."""
    ruleset: str
    summarizer_score_min: NonNegative | None
    """The result summarizer's score of the source, scaling factor applied, in minutes."""
    agrees: bool
    """mltrain's scaled score equals the summarizer's to 1e-9 relative."""
    warnings: tuple[str, ...] = ()
    source: str = ""
    """What the summarizer read."""
    scaling_factor: Positive = 1.0
    scaling_source: str = ""
    """Where the factor came from ('scaling.json in <folder>', 'the RCP checker', '' for none)."""
    division: str | None = None
    """The division the logs state (the export's system description says the same)."""
    rcp: RcpCheck | None = None
    package: PackageCheck | None = None
    rule: ScoringRule | None = None
    """The rule the summarizer scores by (MLPerf's for the benchmark), which ``mltrain_score_min`` uses too;
    None in checks of an older mltrain (which compared the run's own score)."""
    mltrain_score_min: NonNegative | None = None
    """mltrain's score of the same logs by the summarizer's rule, scaling factor applied: what ``agrees`` compares."""


class Summary(Score):
    """``summary.json``: the score, with what identifies the run."""

    run_id: str
    workload: str
    benchmark: str | None = None
    profile: ProfileName
    mlperf_result: bool = False
    label: str | None = None
    target: Finite | None = None
    cuts: tuple[str, ...] = ()
    """What the finished seeds left out of the benchmark's data (their ``cuts``), each sentence once;
    empty: the data whole."""
    mlcommons: MlcommonsCheck | None = None
