"""How a set of runs scored (`Score`, by a `ScoringRule`): each seed's part and the spreads."""

from __future__ import annotations

from pydantic import Field, NonNegativeInt, model_validator

from orchestrator.config.numbers import Finite, NonNegative, Positive
from orchestrator.results.record_base import Record
from orchestrator.results.run_record import RunStatus


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
