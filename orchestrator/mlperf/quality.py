"""A quality goal: the metric a run is judged by, its target, and which way the metric improves.

The one place that says whether a value reaches the target, which of several values is best, and
whether a run collapsed. The direction is the workload's declaration (``quality.better`` in its
``workload.yaml``); MLPerf's compliance rules state the same target as ``v['value'] >= 0.908``
(unet3d's Dice) or ``v['value'] <= 0.925`` (llama2_70b_lora's evaluation loss).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from mlperf_logging.mllog import constants as C

from orchestrator.config.workloads import Better, Quality

COLLAPSED_BELOW = 1e-6
"""A higher-is-better metric at or under this has collapsed (a diverged run's accuracy)."""


@dataclass(frozen=True)
class Goal:
    target: float
    metric: str = C.EVAL_ACCURACY
    better: Better = "higher"

    @classmethod
    def of(cls, quality: Quality, target: float | None = None) -> Goal:
        """The workload's goal, with another target (a profile's) where one is given."""
        return cls(target=quality.target if target is None else target, metric=quality.metric, better=quality.better)

    @property
    def operator(self) -> str:
        """How MLPerf's rules write reaching the target: ``>=`` or ``<=``."""
        return ">=" if self.better == "higher" else "<="

    @property
    def short_of(self) -> str:
        """How a value that misses the target compares with it: ``<`` or ``>``."""
        return "<" if self.better == "higher" else ">"

    def reached(self, value: float) -> bool:
        """The value reaches the target (NaN never does)."""
        return value >= self.target if self.better == "higher" else value <= self.target

    def best(self, values: Iterable[float]) -> float | None:
        """The best of the values that are numbers; None when there is none."""
        numbers = [v for v in values if not math.isnan(v)]
        if not numbers:
            return None
        return max(numbers) if self.better == "higher" else min(numbers)

    def collapsed(self, value: float) -> bool:
        """The metric says the run diverged: NaN, or a higher-is-better metric fallen to about zero."""
        return math.isnan(value) or (self.better == "higher" and value < COLLAPSED_BELOW)
