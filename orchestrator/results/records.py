"""What one run is, once its MLLOG lines have been read: the record every other part uses."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any


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

    @property
    def converged(self) -> bool:
        return self is RunStatus.CONVERGED


@dataclass(frozen=True)
class EvalPoint:
    epoch: float
    """Epoch number as the log states it (samples-based logs are converted to epochs)."""
    accuracy: float
    time_ms: int
    """Milliseconds since run_start."""


@dataclass(frozen=True)
class RunRecord:
    """One run, derived from its MLLOG lines (and the process exit, when we ran it)."""

    status: RunStatus
    reason: str
    """Human-readable cause of the status ('reached 0.912 >= 0.908 at epoch 1840', ...)."""
    seed: int | None = None
    """The seed the run logged (MLLOG `seed`), which may differ from the one requested."""
    benchmark: str | None = None
    run_start_ms: int | None = None
    run_stop_ms: int | None = None
    time_to_train_ms: int | None = None
    """run_stop - run_start; set whenever both are present, converged or not."""
    epochs_to_target: float | None = None
    epochs_run: float | None = None
    """Last epoch the run reached."""
    samples_per_epoch: int | None = None
    global_batch_size: int | None = None
    target: float | None = None
    best_accuracy: float | None = None
    evals: tuple[EvalPoint, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)
    """submission_* and hyperparameter keys as logged."""

    @property
    def converged(self) -> bool:
        return self.status.converged

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["status"] = self.status.value
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunRecord:
        values = dict(data)
        values["status"] = RunStatus(values["status"])
        values["evals"] = tuple(EvalPoint(**e) for e in values.get("evals", ()))
        return cls(**values)
