"""The typed records of node qualification (`mltrain qualify`): what each check measured, against
which reference, and the node's verdict. Validated on load like every stored record.

A check keeps its sanity part (did it run, were its results correct, is the hardware healthy) apart
from its performance numbers (`Measurement`, each judged against a `Reference` that says where it
came from), as ReFrame's checks do.
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from orchestrator.errors import EXIT_INFRASTRUCTURE, EXIT_INVALID_RESULT, EXIT_OK, EXIT_WARN
from orchestrator.results.qualification_v1 import upgrade_fleet, upgrade_node
from orchestrator.results.records import Record

SCHEMA_VERSION = 2
"""2: "could not run" is INCONCLUSIVE (``inconclusive``); version 1 said ``error`` (upgraded on read)."""


class Status(str, Enum):
    """The state of a measurement, a check or a node, best first (`rank`)."""

    PASS = "pass"
    NOT_APPLICABLE = "not_applicable"
    """The check does not apply here (no GPU, one GPU for all-reduce, no throughput entry): never a pass."""
    WARN = "warn"
    INCONCLUSIVE = "inconclusive"
    """Could not measure (a tool missing, a probe crashed, the engine down, a runner refused): the node
    is neither passed nor failed."""
    FAIL = "fail"
    UNJUDGED = "unjudged"
    """A measured number with nothing to judge it by: no operator reference, no floor of its GPU model,
    too short a history. Never a pass (a measurement's status only)."""

    @property
    def rank(self) -> int:
        return _RANK[self]

    @property
    def word(self) -> str:
        return "N/A" if self is Status.NOT_APPLICABLE else self.value.upper()


_RANK = {Status.PASS: 0, Status.NOT_APPLICABLE: 0, Status.UNJUDGED: 0, Status.WARN: 1, Status.INCONCLUSIVE: 2,
         Status.FAIL: 3}

VERDICT_EXIT_CODES = {Status.PASS: EXIT_OK, Status.WARN: EXIT_WARN, Status.FAIL: EXIT_INVALID_RESULT,
                      Status.INCONCLUSIVE: EXIT_INFRASTRUCTURE}
"""A node's (or a fleet's) verdict -> the exit code of `mltrain qualify`: the one mapping, which the
record, its JSON, JUnit and Prometheus all carry (`judge.exit_code` applies --strict and
``warn_exit_code``). 2 stays bad input (nothing was qualified)."""
VERDICTS = tuple(VERDICT_EXIT_CODES)
MEASUREMENT_STATUSES = (*VERDICTS, Status.UNJUDGED)
"""What a measured number can be: judged (pass, warn, fail; inconclusive where its repeats could not
measure it), or unjudged."""


def finite(value: Any) -> float | None:
    """A finite number as float; None for anything else (bool, NaN, inf, text)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if value == value and abs(value) != float("inf") else None


def worst(statuses: list[Status], default: Status = Status.PASS) -> Status:
    """The most severe status (FAIL > INCONCLUSIVE > WARN > PASS); `default` when there are none."""
    return max(statuses, key=lambda s: s.rank, default=default)


ReferenceKind = Literal["operator", "history", "fleet", "floor"]


class Reference(Record):
    """ReFrame's (value, lower, upper, unit) for one metric, with where it came from. ``lower`` and
    ``upper`` are absolute bounds (None: unbounded on that side)."""

    value: float
    lower: float | None
    upper: float | None
    unit: str
    kind: ReferenceKind
    source: str
    """Where the numbers come from: the operator's file and its stated source, the history runs, or
    the public document a model's floor comes from."""


QuorumOutcome = Literal["confirmed", "overturned", "inconclusive"]


class Quorum(Record):
    """A performance number that failed its reference on its first reading, measured again."""

    first: float
    """The first reading, which failed."""
    repeats: tuple[float | None, ...]
    """Each re-measurement in order (None: that repeat could not measure it)."""
    below: int = Field(ge=0)
    """How many of the repeats failed the reference too."""
    needed: int = Field(ge=1)
    """How many had to, for the failure to stand."""
    outcome: QuorumOutcome
    """confirmed: it FAILs (the first value kept); overturned: judged on the median of the passing
    repeats; inconclusive: too few repeats could measure it."""


class Measurement(Record):
    """One performance number of a check, judged."""

    metric: str = Field(min_length=1)
    value: float
    unit: str
    better: Literal["higher", "lower"] = "higher"
    detail: str = ""
    device: str = ""
    """The GPU that measured it (index and PCI bus id, as reasons name it); "" where not one GPU's."""
    reference: Reference | None = None
    rolling_median: float | None = None
    """Median of this node's last passing runs on the same hardware and software (None: too few)."""
    quorum: Quorum | None = None
    """Re-measured because its first reading failed its reference (`qualify.quorum`); None: not repeated."""
    status: Status = Status.PASS
    reason: str = ""
    """Why the status: metric, value, bound, and the reference's source."""

    @field_validator("value")
    @classmethod
    def _finite(cls, value: float) -> float:
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError("must be a finite number")
        return value


CheckKind = Literal["health", "microbenchmark", "integrity", "workload", "fabric", "time_to_train"]
"""health: the hardware's state; microbenchmark: a kernel's right answers and speed; integrity: right
answers only (the same bits every time); workload: the workload's or the inference harness's own
numbers; fabric: between nodes; time_to_train: one seed trained to its target."""


class Remedy(str, Enum):
    """What a FAIL asks for, as a fleet tool acts on it without reading the reasons (a check's and a
    node's ``remediation``). In the order a person would escalate, the most drastic first."""

    REPLACE = "replace"
    """Replace the part (RMA): wrong results, a failed row remap, a diagnostic the hardware failed."""
    RESEAT = "reseat"
    """Reseat the card or its cable: a PCIe link narrower or slower than it should be."""
    DRAIN_REBOOT = "drain_reboot"
    """Drain the node and reboot it: a GPU lost (Xid 79), a driver that does not answer."""
    RESET_GPU = "reset_gpu"
    """Reset the GPU (nvidia-smi -r, the node drained): pending row remaps or page retirements."""
    CHECK_FABRIC = "check_fabric"
    """Check the network between nodes (links, switches, NICs): a slow or failing all-reduce."""
    CHECK_COOLING = "check_cooling"
    CHECK_POWER = "check_power"
    CHECK_STORAGE = "check_storage"
    FREE_DISK = "free_disk"
    FIX_SOFTWARE = "fix_software"
    """The driver, CUDA, the image or the runtime: CUDA cannot use the GPUs, a probe of another protocol."""
    INVESTIGATE = "investigate"
    """A number below its floor with no cause found: drain the node for a person to look."""


class Remediation(Record):
    """One action a FAIL asks for, and what it is for."""

    action: Remedy
    check: str = Field(min_length=1)
    """The check whose FAIL asks for it."""
    gpu: int | None = Field(default=None, ge=0)
    """The GPU it is for (NVML's index, nvidia-smi's); None: the node."""
    node: str | None = None
    """The node it is for where another than the record's (a fleet check naming the slow node)."""

    @property
    def key(self) -> str:
        """``action[:gpu<i>][:node=<name>]`` (``reset_gpu:gpu3``): how JUnit's properties carry it."""
        return ":".join([self.action.value, *([f"gpu{self.gpu}"] if self.gpu is not None else []),
                         *([f"node={self.node}"] if self.node else [])])


class CheckResult(Record):
    """One check: its sanity verdict, its measurements, and the status they make together."""

    name: str = Field(min_length=1)
    kind: CheckKind
    status: Status
    reasons: tuple[str, ...] = ()
    """Why the status, most severe first ('' reasons are never kept)."""
    sanity: Status
    """PASS, FAIL (the hardware or a result is wrong), INCONCLUSIVE (could not run) or NOT_APPLICABLE."""
    sanity_reasons: tuple[str, ...] = ()
    measurements: tuple[Measurement, ...] = ()
    skipped: dict[str, str] = Field(default_factory=dict)
    """Metrics this device cannot measure, and why (tf32 on a CPU ...)."""
    facts: dict[str, Any] = Field(default_factory=dict)
    """What the check read on the way (driver version, link widths, the output file ...)."""
    remediation: tuple[Remediation, ...] = ()
    """What its FAIL asks for (`Remedy`), most drastic first; empty unless it FAILed (and in records
    written before remediation was kept)."""
    duration_s: float = Field(default=0.0, ge=0)

    @property
    def reason(self) -> str:
        return self.reasons[0] if self.reasons else ""


class Hardware(Record):
    """What makes two nodes comparable: references and history are kept per hardware."""

    gpu_model: str | None = None
    gpu_count: int = Field(default=0, ge=0)
    cpu_model: str = "unknown CPU"
    cpus: int = Field(default=0, ge=0)

    @property
    def key(self) -> str:
        if self.gpu_model:
            return f"{self.gpu_count}x {self.gpu_model}"
        return f"{self.cpus} CPUs {self.cpu_model}"

    @property
    def model(self) -> str:
        """The model references are looked up by: the GPU's, else the CPU's."""
        return self.gpu_model or self.cpu_model


class QualificationRecord(Record):
    """``<results>/qualify/<node>/<id>.json``: one qualification of one node."""

    schema_version: int = SCHEMA_VERSION
    qualification_id: str = Field(min_length=1)
    node: str = Field(min_length=1)
    suite: str
    runner: str
    started_at: str
    ended_at: str
    duration_s: float = Field(ge=0)
    verdict: Status
    exit_code: int
    reasons: tuple[str, ...] = ()
    """The reasons of the checks that made the verdict, most severe first."""
    strict: bool = False
    """WARN counted as a failure for the exit code."""
    hardware: Hardware
    software: dict[str, str] = Field(default_factory=dict)
    """What a learned reference must share with its history: torch, CUDA, driver, runner, image."""
    checks: tuple[CheckResult, ...]
    references_file: str | None = None
    workload: str | None = None
    time_to_train_run: str | None = None
    """The stored run of the full suite's time-to-train seed."""
    timings: dict[str, float] = Field(default_factory=dict)
    """Wall seconds per phase (health reads, probe start-up and each probe check, throughput ...)."""
    system: dict[str, Any] = Field(default_factory=dict)
    remediation: tuple[Remediation, ...] = ()
    """What the node's FAILs ask for, every check's together, most drastic first (`qualify.remedies`):
    what a fleet tool acts on without reading the reasons."""

    @model_validator(mode="before")
    @classmethod
    def _upgrade(cls, data: Any) -> Any:
        return upgrade_node(data)

    @field_validator("verdict")
    @classmethod
    def _node_verdict(cls, value: Status) -> Status:
        if value not in VERDICTS:
            raise ValueError(f"a node's verdict is {', '.join(v.value for v in VERDICTS)}")
        return value

    def check(self, name: str) -> CheckResult | None:
        return next((c for c in self.checks if c.name == name), None)

    def measurements(self) -> dict[str, Measurement]:
        return {m.metric: m for c in self.checks for m in c.measurements}


class FleetRow(Record):
    """One node in the fleet table."""

    node: str
    hardware: str
    verdict: Status
    qualification_id: str | None = None
    worst_metric: str | None = None
    worst_vs_fleet_pct: float | None = None
    """How far the node's worst metric is from the fleet median of its hardware, in percent (negative: worse)."""
    flagged: bool = False
    """Slower than its peers by more than k MADs (with or without references)."""
    reason: str = ""
    remediation: tuple[Remediation, ...] = ()
    """What its FAILs ask for: its own record's, and the fleet checks' that name it (a slow pair)."""


class FleetRecord(Record):
    """``<results>/qualify/fleet/<id>.json``: one fleet-wide qualification."""

    schema_version: int = SCHEMA_VERSION
    fleet_id: str
    suite: str
    started_at: str
    ended_at: str
    verdict: Status
    exit_code: int
    rows: tuple[FleetRow, ...]
    jobs: dict[str, str] = Field(default_factory=dict)
    """node -> Slurm job id."""
    checks: tuple[CheckResult, ...] = ()
    """The checks run between the nodes (all-reduce between pairs), judged."""

    @model_validator(mode="before")
    @classmethod
    def _upgrade(cls, data: Any) -> Any:
        return upgrade_fleet(data)

class NodeOrder(Record):
    """``<results>/qualify/fleet/<fleet id>/<node>/order.json``: one node's qualification as a fleet
    orders it, read by the node's own ``mltrain qualify order FILE`` (run there by its Slurm job)."""

    schema_version: int = SCHEMA_VERSION
    fleet_id: str
    node: str
    """Names the node's records (``--node-name``)."""
    suite: str
    results: Path
    """The (shared) results folder the node's record goes into."""
    record: Path
    """Where the node also writes its record, for the fleet to gather."""
    references: Path | None = None
    """Operator references (``--references``)."""
    data: Path | None = None
    """The dataset whose storage and input pipeline are timed (``--data``)."""
    strict: bool = False
    gpus: Literal["none"] | None = None
    """``none``: the checks are kept off the node's GPUs (its verdict says so); None: every GPU of the node."""
    expect_gpus: int | None = Field(default=None, ge=0)
    """The GPUs the node is expected to have (--expect-gpus, else its Slurm gres); None: nothing says."""
    expect_gpus_source: str = ""
    """What says so."""
