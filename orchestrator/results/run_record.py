"""What one run of a seed was (`RunRecord`): how it ended (`RunStatus`, `Exit`), its evaluations, its
compliance check, and whether its host was quiet."""

from __future__ import annotations

from enum import Enum
from typing import Any, Literal

from pydantic import Field, NonNegativeInt, PositiveInt, model_validator

from orchestrator.config.numbers import Finite, NonNegative
from orchestrator.results.record_base import Record

MAX_RUN_MS = 366 * 86_400_000
"""The longest run_start-to-run_stop a stored run may hold: a year (an imported run_stop of 2^53 ms
made a converged seed of 285,000 years)."""


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
    failed_node: str = ""
    """Of a job across nodes: the node whose part failed first ('' when none did, or one node ran it)."""


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
    node: str = ""
    """The node it happened on, of a seed a batch system ran ('': the host that ran the seed)."""


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
    quiet_host: QuietHost | None = None
    """Was this node quiet while the seed ran, judged from its own series (None: not judged)."""
    container: str | None = None
    """The image its launcher's container ran, as the node's engine held it (``tag@sha256:...``;
    ``--runner slurm-docker``); None: no container."""


class Placement(Record):
    """Where a seed that ran across nodes ran: every node, the world size, the rendezvous and the fabric."""

    nodes: tuple[NodeFacts, ...]
    world_size: PositiveInt
    """Ranks in the job: the sum of each node's processes."""
    backend: Literal["nccl", "gloo"]
    """The collectives' library: NCCL where the ranks have GPUs, gloo on CPUs."""
    rendezvous: str
    """host:port of torchrun's c10d rendezvous, on the first node."""


class SeedEnergy(Record):
    """A seed's GPU energy between run_start and run_stop, from its telemetry when it ended
    (`orchestrator.insight.telemetry_summary.seed_energy`): kept in its record, so that a comparison
    of thousands of runs reads it from the index rather than from every series."""

    joules: Finite | None
    """None when it is unknown (no GPU power, too few samples): ``method`` says why."""
    method: str


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
    """Training samples per epoch (the log's samples_per_epoch, else the workload's, else train_samples):
    samples/s = this x epochs / s."""
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
    energy: SeedEnergy | None = None
    """Its energy from its telemetry; None: no telemetry to cut (or a record of an older mltrain)."""
    placement: Placement | None = None
    """The nodes, world size and fabric of a seed run across nodes (`--nodes N`); None: one node."""

    @property
    def node_names(self) -> tuple[str, ...]:
        """The nodes its placement names (none for a seed on one node)."""
        return tuple(n.name for n in self.placement.nodes) if self.placement is not None else ()

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
