"""``decisions.json`` beside a run's summary: the rule that chose how many seeds the run needed
(`mltrain run --until-decided`, `--seeds auto`) and what it concluded after each finished seed.

The rule is written when the run is made, before its first seed, so that a resumed run goes on
under the same rule; the reference's per-seed values are kept in it, so the decisions can be
checked from this file alone and do not move when the reference runs change later.
"""

from __future__ import annotations

from enum import Enum
from typing import Literal

from pydantic import Field, NonNegativeInt, PositiveInt, model_validator

from orchestrator.config.numbers import Finite, Positive
from orchestrator.results.records import Record

QuantityName = Literal["seconds_per_epoch", "samples_per_second", "time_to_train_s"]
"""Per-seed quantities, named as `mltrain compare` names them."""
QUANTITIES: tuple[QuantityName, ...] = ("seconds_per_epoch", "samples_per_second", "time_to_train_s")
"""What is compared, in the order decisions list them: the hardware's speed (per epoch, per
sample), then time-to-train."""


class Verdict(str, Enum):
    """What a comparison says so far of the new setup against the reference."""

    FASTER = "faster"
    SLOWER = "slower"
    EQUIVALENT = "equivalent"
    """Within the margin either way."""
    UNDECIDED = "undecided"


class DecisionRule(Record):
    """How the run decides, after each seed, whether another one is needed."""

    mode: Literal["until_decided", "width"]
    """until_decided: until the comparison with the reference is decided; width: until the mean
    per-seed time-to-train is known to within ``width`` (`--seeds auto`)."""
    method: str = Field(min_length=1)
    """The statistical method, named with its citation."""
    alpha: float = Field(gt=0, lt=1)
    """Error rate that holds however many seeds are looked at."""
    max_seeds: PositiveInt
    least_seeds: PositiveInt
    """No stop before this many seeds (the sequence's first finite interval, the olympic rule's minimum)."""
    seed_order: tuple[int, ...] = Field(min_length=1)
    """The seeds in the order they run (max_seeds of them): the manifest's seeds are a prefix."""
    margin: Positive | None = None
    """until_decided: relative difference within which the setups are equivalent (0.03: 3%)."""
    width: Positive | None = None
    """width: the relative half-width the interval must reach (0.05: +-5%)."""
    against: str | None = None
    """The reference as the user named it (run id or label)."""
    reference_run_ids: tuple[str, ...] = ()
    reference: dict[QuantityName, tuple[Positive, ...]] = Field(default_factory=dict)
    """The reference's per-seed values (seconds, samples/s) as they were when the run began."""

    @property
    def primary(self) -> QuantityName:
        """The quantity the run must decide: per-epoch speed, or time-to-train where no epochs are logged."""
        return "seconds_per_epoch" if "seconds_per_epoch" in self.reference else "time_to_train_s"

    @model_validator(mode="after")
    def _consistent(self) -> DecisionRule:
        if len(self.seed_order) != self.max_seeds or len(set(self.seed_order)) != self.max_seeds:
            raise ValueError("seed_order must name max_seeds distinct seeds")
        if self.least_seeds > self.max_seeds:
            raise ValueError("least_seeds exceeds max_seeds")
        if self.mode == "until_decided" and (self.margin is None or not self.reference):
            raise ValueError("an until_decided rule needs a margin and the reference's values")
        if self.mode == "width" and self.width is None:
            raise ValueError("a width rule needs its width")
        return self


class QuantityDecision(Record):
    """One quantity of the new setup against the reference, after some seeds."""

    quantity: QuantityName
    n: NonNegativeInt
    """Values of the new setup so far (converged seeds that have the quantity)."""
    reference_n: NonNegativeInt
    speed: Positive | None
    """How many times faster the new setup is (> 1 faster): ratio of geometric means."""
    low: Positive | None
    """The confidence sequence's ends (None: still open)."""
    high: Positive | None
    verdict: Verdict
    within_reach: bool
    """Undecided, but the seeds left could still decide it at the spread seen."""


class MeanDecision(Record):
    """`--seeds auto`: the geometric mean per-seed time-to-train and its confidence sequence."""

    n: NonNegativeInt
    mean_ms: Positive | None
    low_ms: Positive | None
    high_ms: Positive | None
    relative_half_width: Finite | None
    """(high / mean) - 1; None while the interval is open."""


class DecisionStep(Record):
    """What the rule concluded after one more seed finished."""

    seeds: PositiveInt
    """Seeds finished so far."""
    seed: int
    """The last seed the run has taken (the manifest's last)."""
    comparisons: tuple[QuantityDecision, ...] = ()
    mean: MeanDecision | None = None
    outcome: Literal["going_on", "decided", "budget_spent"]
    """going_on: another seed runs; decided: every quantity that can be is decided (or, --seeds auto,
    the interval is as narrow as asked); budget_spent: --max-seeds ran without that."""

    @property
    def goes_on(self) -> bool:
        return self.outcome == "going_on"


class DecisionLog(Record):
    """``decisions.json``: the rule and its conclusion after each seed, oldest first."""

    rule: DecisionRule
    steps: tuple[DecisionStep, ...] = ()

    @property
    def last(self) -> DecisionStep | None:
        return self.steps[-1] if self.steps else None
