"""The typed records mltrain keeps: what one run of a seed was (`RunRecord`), how a set of runs
scored (`Score`), and the three files of a run folder (`Manifest`, `Summary`, `SeedState`).

Every stored file is validated when it is read (`orchestrator.results.store`), so a damaged or
foreign file is one error naming the file and the field, never a `KeyError` deep inside.
"""

from __future__ import annotations

from enum import Enum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt, PositiveInt, model_validator

from orchestrator.config.numbers import Finite, NonNegative, Positive
from orchestrator.config.profiles import ProfileName

MAX_RUN_MS = 366 * 86_400_000
"""The longest run_start-to-run_stop a stored run may hold: a year (an imported run_stop of 2^53 ms
made a converged seed of 285,000 years)."""


class Record(BaseModel):
    """Frozen, strict about unknown fields, and JSON in and out."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    @classmethod
    def from_json(cls, data: Any) -> Any:
        return cls.model_validate(data)


# ---- one run of a seed ---------------------------------------------------------------------


class RunStatus(str, Enum):
    """Why a run ended. Only CONVERGED counts towards a score; a crash is an infrastructure
    fault, not a slow run, so the reason is always kept."""

    CONVERGED = "converged"
    NOT_CONVERGED = "not_converged"  # ran to its epoch cap (run_stop aborted) without the target
    DIVERGED = "diverged"  # the workload aborted on divergence (accuracy collapsed, NaN loss)
    CRASHED = "crashed"  # non-zero exit or no run_stop
    TIMED_OUT = "timed_out"  # the orchestrator's wall-clock limit
    INTERRUPTED = "interrupted"  # Ctrl-C / cancel
    KILLED = "killed"  # killed by a signal from outside
    OOM = "out_of_memory"  # host or device out of memory
    NON_COMPLIANT = "non_compliant"  # the log breaks a rule mlperf_logging's compliance checker applies

    @property
    def converged(self) -> bool:
        return self is RunStatus.CONVERGED


INFRASTRUCTURE_FAULTS = frozenset({RunStatus.CRASHED, RunStatus.KILLED, RunStatus.OOM, RunStatus.TIMED_OUT})
"""Runs that failed for the machine's sake rather than the model's."""


class Exit(Record):
    """How a seed's process ended, as its runner saw it."""

    code: int | None
    """Exit status; negative for a signal (local), None when unknown."""
    oom_killed: bool = False
    """The kernel or the engine killed it for memory."""
    detail: str = ""


class EvalPoint(Record):
    epoch: float
    """Epoch number as the log states it (samples-based logs are converted to epochs)."""
    accuracy: float
    time_ms: int
    """Milliseconds since run_start."""


class Compliance(Record):
    """What mlperf_logging's compliance checker said of one run's log."""

    ruleset: str
    """The checker's ruleset (training 4.0.0, ...)."""
    valid: bool
    """The log passes every rule that was applied."""
    reason: str = ""
    """The checker's first complaint, one line ('' when valid)."""
    relaxed: tuple[str, ...] = ()
    """Rules the run's profile deliberately changes (the target, the dataset size), not applied, each
    with why."""


HostCauseName = Literal["other_processes", "cpu_steal", "memory_pressure", "gpu_processes", "gpu_throttle"]


class HostCause(Record):
    """One thing that disturbed a seed's host, and for how much of the seed's time."""

    cause: HostCauseName
    share: float = Field(ge=0, le=1)
    """Share of the seed's samples (run_start to run_stop) in which it passed its threshold."""
    mean: Finite | None = None
    """The signal's mean over the seed's samples, in its own unit (percent of the host's CPU, of the
    time stalled; processes on the GPUs)."""
    sentence: str
    """What happened, in a sentence a person reads ('the host ran other work in 78% of the seed's time ...')."""


class QuietHost(Record):
    """Was the host quiet while the seed ran? Judged from its telemetry by `orchestrator.insight.quiet`
    (the thresholds and their reasons are there)."""

    verdict: Literal["quiet", "disturbed", "unknown"]
    reason: str
    """One line: what was measured and found, or why nothing could be judged."""
    samples: int = Field(default=0, ge=0)
    """Telemetry samples between run_start and run_stop."""
    causes: tuple[HostCause, ...] = ()
    """What disturbed it (empty unless disturbed)."""
    measured: dict[str, Finite | None] = Field(default_factory=dict)
    """Each signal's mean over the seed's samples (and the largest count of other GPU processes)."""
    not_measured: dict[str, str] = Field(default_factory=dict)
    """Signals this host could not give, and why."""


class NodeFacts(Record):
    """One node of a seed that ran across nodes, as its launcher saw it (`orchestrator.runners.nodes`)."""

    name: str
    """The node's name in the batch system."""
    node_rank: NonNegativeInt
    """Its place among the seed's nodes (0: the node of the rendezvous, whose rank 0 logs MLLOG)."""
    processes: PositiveInt
    """Ranks started on it (one per GPU)."""
    interfaces: dict[str, tuple[str, ...]] = Field(default_factory=dict)
    """Network interfaces with an address, and their IPv4 addresses."""
    ib_devices: tuple[str, ...] = ()
    """InfiniBand devices (/sys/class/infiniband); empty where there are none."""
    socket_ifname: str | None = None
    """NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME as the job set it (None: the library chose)."""


class Placement(Record):
    """Where a seed that ran across nodes ran: every node, the world size, the rendezvous and the fabric."""

    nodes: tuple[NodeFacts, ...]
    world_size: PositiveInt
    """Ranks in the job: the sum of each node's processes."""
    backend: Literal["nccl", "gloo"]
    """The collectives' library: NCCL where the ranks have GPUs, gloo on CPUs."""
    rendezvous: str
    """host:port of torchrun's c10d rendezvous, on the first node."""


class RunRecord(Record):
    """One run, derived from its MLLOG lines (and the process exit, when we ran it)."""

    status: RunStatus
    reason: str
    """Human-readable cause of the status ('reached 0.912 >= 0.908 at epoch 1840', ...)."""
    seed: int | None = None
    """The seed the run logged (MLLOG `seed`), which may differ from the one requested."""
    benchmark: str | None = None
    run_start_ms: int | Finite | None = None
    run_stop_ms: int | Finite | None = None
    time_to_train_ms: NonNegativeInt | NonNegative | None = None
    """run_stop - run_start; set whenever both are present, converged or not (whole milliseconds
    unless the log's times have fractions, so that scores equal the summarizer's)."""
    epochs_to_target: NonNegative | None = None
    """In epochs, whatever the log counts them in (logs that count samples are converted)."""
    epochs_run: NonNegative | None = None
    """Last epoch the run reached."""
    samples_per_epoch: PositiveInt | None = None
    """Training samples per epoch (samples_per_epoch, else train_samples): samples/s = this x epochs / s."""
    train_samples: PositiveInt | None = None
    """train_samples as logged: the divisor of logs that count epochs in samples."""
    global_batch_size: PositiveInt | None = None
    target: Finite | None = None
    best_accuracy: Finite | None = None
    evals: tuple[EvalPoint, ...] = ()
    metadata: dict[str, Any] = Field(default_factory=dict)
    """submission_* and hyperparameter keys as logged."""
    division: str | None = None
    """submission_division as the workload logged it (closed or open)."""
    division_reason: str | None = None
    """Why the workload logged that division (its ``reason`` metadata), when it said."""
    resolved_settings: dict[str, Any] | None = None
    """The ``resolved_settings`` event: precision, threads, device... as the workload chose them."""
    cuts: str | None = None
    """What the run left out of the benchmark's data, as its ``cuts`` event said it; None: nothing."""
    compliance: Compliance | None = None
    """mlperf_logging's compliance checker on this run's log; None when it was not run."""
    quiet_host: QuietHost | None = None
    """Whether the host was quiet while the seed ran (its telemetry judged); None: not judged (a
    record of an older mltrain, an imported log)."""
    placement: Placement | None = None
    """The nodes, world size and fabric of a seed run across nodes (`--nodes N`); None: one node."""

    @property
    def converged(self) -> bool:
        return self.status.converged

    @model_validator(mode="after")
    def _converged_runs_have_a_time(self) -> RunRecord:
        if self.status.converged and self.time_to_train_ms is None:
            raise ValueError("a converged run needs its time_to_train_ms")
        if self.time_to_train_ms is not None and self.time_to_train_ms > MAX_RUN_MS:
            raise ValueError(f"time_to_train_ms {self.time_to_train_ms:g} is more than a year: not a time a run took")
        return self


# ---- scoring -------------------------------------------------------------------------------


class ScoringRule(Record):
    """How a set of runs becomes one number."""

    drop_per_end: int = Field(ge=0)
    """Olympic scoring: runs dropped at the fast end; at the slow end, this less the non-converged."""
    max_non_converged: int = Field(ge=0)
    """More non-converged runs than this make the result invalid."""
    runs_required: int | None = Field(default=None, ge=1)
    """A valid result needs exactly this many runs; None: any number."""

    @model_validator(mode="after")
    def _non_converged_fits_drops(self) -> ScoringRule:
        if self.max_non_converged > self.drop_per_end:
            raise ValueError("max_non_converged cannot exceed drop_per_end")
        return self


class Spread(Record):
    """Descriptive statistics of one quantity over runs."""

    n: int = Field(ge=0)
    mean: Finite | None
    std: Finite | None
    cv: Finite | None
    minimum: Finite | None
    maximum: Finite | None
    ci95_low: Finite | None
    ci95_high: Finite | None


class SeedScore(Record):
    """One seed's line in a score."""

    status: RunStatus
    reason: str
    time_to_train_ms: NonNegativeInt | NonNegative | None
    epochs_to_target: NonNegative | None
    counted: bool


class Score(Record):
    valid: bool
    reason: str
    """Why the result is invalid ('' when valid)."""
    score_ms: NonNegative | None
    """Olympic mean of time-to-train."""
    scaling_factor: Positive = 1.0
    """The RCP scaling factor MLCommons multiplies the olympic mean by (``scaling.json``); 1.0 when none."""
    scaled_score_ms: NonNegative | None = None
    """score_ms x scaling_factor: the score as mlperf_logging's result summarizer reports it."""
    runs: int = Field(ge=0)
    converged: int = Field(ge=0)
    non_converged: int = Field(ge=0)
    unfinished: int = Field(ge=0)
    counted_seeds: tuple[int, ...]
    dropped_fast_seeds: tuple[int, ...]
    dropped_slow_seeds: tuple[int, ...]
    time_to_train_ms: Spread
    """Over every converged run."""
    epochs_to_target: Spread
    ms_per_epoch: Spread
    rule: ScoringRule
    per_seed: dict[int, SeedScore] = Field(default_factory=dict)


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

    model_config = ConfigDict(frozen=True, extra="allow")  # later versions may add fields

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
