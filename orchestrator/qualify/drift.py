"""Drift: a slow fall of a performance number over nights, each night inside its bounds, caught
before the floor is crossed by a one-sided tabular CUSUM on the node's own series (Page, E. S.,
"Continuous inspection schemes", Biometrika 41 (1954) 100-115; Montgomery, Introduction to
Statistical Quality Control, ch. 9, "the tabular CUSUM").

The series is this node's passing runs on the same hardware and software (`references.passing_runs`;
new software starts a new series, so an upgrade that changes the numbers is no drift), then tonight.
Its baseline is the median of its first `DriftPolicy.baseline_runs` nights; each later night is a
shortfall d = (baseline - value) / baseline (the other way round for a lower-is-better number), and
sigma, the night-to-night noise, is the median moving range / 0.954 of the baseline nights relative
to the baseline (Montgomery's phase I; at least `noise_floor_pct`), so that a drift does not widen
it. Over the last `window` nights S_0 = 0, S_t = max(0, S_{t-1} + d_t - k sigma); tonight WARNs
when S > h sigma. A steady fall of more than k sigma a night grows S until it passes h.

Simulated with the defaults (k 0.5, h 7.5, baseline 10 nights, 100 series of 365 nights each): a
fall of 1 % a night WARNs on its 4th to 6th night; a steady number WARNs falsely within a year in
1 of 100 series with 0.5 % night-to-night noise, 17 with 1 %, 32 with 2 % (the baseline is itself
an estimate; a longer baseline or a self-starting CUSUM, Hawkins 1987, would do better).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from orchestrator.qualify.config import DriftPolicy
from orchestrator.results.qualification import Measurement, QualificationRecord, Status

MEDIAN_MOVING_RANGE = 0.954
"""The median of |x_t - x_{t-1}| of normal noise is 0.954 sigma (0.6745 x sqrt 2)."""


@dataclass(frozen=True)
class Cusum:
    baseline: float
    sigma: float
    """Night-to-night noise, a fraction of the baseline."""
    total: float
    """S after the last night, a fraction of the baseline."""
    start: int
    """Index of the first night of the current run of positive S (len(values): none)."""


def cusum(values: Sequence[float], better: str, policy: DriftPolicy) -> Cusum:
    """The CUSUM of a series (oldest first, at least ``baseline_runs + 1`` values)."""
    base = policy.baseline_runs
    baseline = statistics.median(values[:base])
    first = max(base, len(values) - policy.window)
    relative = [v / baseline for v in values[:base]]
    ranges = [abs(a - b) for a, b in zip(relative[1:], relative[:-1], strict=True)]
    sigma = max(statistics.median(ranges) / MEDIAN_MOVING_RANGE, policy.noise_floor_pct / 100)
    total, start = 0.0, len(values)
    for index in range(first, len(values)):
        shortfall = (baseline - values[index]) / abs(baseline)
        total = max(0.0, total + (shortfall if better == "higher" else -shortfall) - policy.allowance_sigma * sigma)
        if total == 0.0:
            start = len(values)
        elif start == len(values):
            start = index
    return Cusum(baseline=baseline, sigma=sigma, total=total, start=start)


@dataclass(frozen=True)
class Fall:
    """A metric whose CUSUM passed h tonight."""

    cusum: Cusum
    since: str
    """When the current run of positive sums began (the started_at of its first night)."""
    nights: int
    """Nights in that run, tonight included."""
    fall: float
    """Tonight's shortfall from the baseline, a fraction (0.05: 5 % worse)."""


class Drift:
    """The node's series of every metric, and the rule that finds a fall in tonight's value."""

    def __init__(self, history: Sequence[QualificationRecord], policy: DriftPolicy) -> None:
        """``history``: the node's passing runs on this hardware and software, oldest first."""
        self.policy = policy
        self.series: dict[str, list[tuple[str, float]]] = {}
        for record in history:
            for m in record.measurements().values():
                if m.status is not Status.FAIL:
                    self.series.setdefault(m.metric, []).append((record.started_at, m.value))

    def fall(self, m: Measurement) -> Fall | None:
        """The fall of ``m`` (tonight's value) over its series, where the CUSUM passes h; None where
        it does not, or the series is no longer than its baseline."""
        nights = self.series.get(m.metric, [])
        if len(nights) < self.policy.baseline_runs:
            return None
        values = [v for _, v in nights] + [m.value]
        if statistics.median(values[:self.policy.baseline_runs]) == 0:
            return None
        found = cusum(values, m.better, self.policy)
        if found.total <= self.policy.threshold_sigma * found.sigma:
            return None
        shortfall = (found.baseline - m.value) if m.better == "higher" else (m.value - found.baseline)
        since = nights[found.start][0] if found.start < len(nights) else "tonight"
        return Fall(cusum=found, since=since, nights=len(values) - found.start, fall=shortfall / abs(found.baseline))
