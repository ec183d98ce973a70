"""The statistics comparisons rest on, pure functions of plain numbers: a Student-t interval of
a mean, the coefficient of variation, the interval of a ratio of means, Welch's t-test, and how
many seeds per setup such a test would need to resolve a difference."""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from orchestrator import student_t
from orchestrator.mlperf.scoring import t_interval

FloatArray = NDArray[np.float64]
"""Per-seed values as a comparison holds them (`compare.Setup.values`)."""
Values = Sequence[float] | FloatArray
"""What each statistic takes: a sequence of numbers, or such an array."""

ALPHA = 0.05
POWER = 0.8
MAX_SEEDS_NEEDED = 1_000_000
"""The ceiling of the seeds-needed search."""


@dataclass(frozen=True, kw_only=True)
class Interval:
    """A point estimate with a 95% interval; None where it cannot be computed."""

    value: float | None
    low: float | None
    high: float | None



@dataclass(frozen=True, kw_only=True)
class Test:
    """A Welch two-sample t-test of this setup against the baseline."""

    p_value: float | None
    """Two-sided; None when either side has fewer than two values or no spread."""
    significant: bool
    """p < ALPHA."""
    seeds_needed: int | None
    """Seeds per setup for a Welch test (alpha 0.05, power 0.8) to resolve the observed
    difference; None when there is no difference or too few values to say."""



def mean_interval(values: Values) -> Interval:
    """Mean with a Student-t 95% interval (`scoring.t_interval`) of a quantity that is never negative
    (a time, epochs, a rate): its low end is at least 0."""
    if not len(values):
        return Interval(value=None, low=None, high=None)
    interval = t_interval(values, 1 - ALPHA, floor=0.0)
    return Interval(value=float(np.mean(np.asarray(values, dtype=float))), low=interval[0] if interval else None,
                    high=interval[1] if interval else None)


def cv(values: Values) -> float | None:
    if len(values) < 2:
        return None
    array = np.asarray(values, dtype=float)  # once: numpy makes one of a list at each call
    mean = float(np.mean(array))
    return float(np.std(array, ddof=1)) / mean if mean else None


def ratio_interval(base: Values, values: Values, *, higher_is_better: bool) -> Interval:
    """Ratio of means (oriented so >1 is better) with a 95% interval by the delta method on the log
    ratio, using Welch's degrees of freedom."""
    if not len(base) or not len(values):
        return Interval(value=None, low=None, high=None)
    base, values = np.asarray(base, dtype=float), np.asarray(values, dtype=float)
    mean_b, mean_s = float(np.mean(base)), float(np.mean(values))
    if mean_b <= 0 or mean_s <= 0:
        return Interval(value=None, low=None, high=None)
    value = mean_s / mean_b if higher_is_better else mean_b / mean_s
    if len(base) < 2 or len(values) < 2:
        return Interval(value=value, low=None, high=None)
    var_b = float(np.var(base, ddof=1)) / len(base) / mean_b**2
    var_s = float(np.var(values, ddof=1)) / len(values) / mean_s**2
    se = math.sqrt(var_b + var_s)
    if se == 0:
        return Interval(value=value, low=value, high=value)
    df = (var_b + var_s) ** 2 / (var_b**2 / (len(base) - 1) + var_s**2 / (len(values) - 1))
    half = student_t.t_ppf(1 - ALPHA / 2, df) * se
    return Interval(value=value, low=value * math.exp(-half), high=value * math.exp(half))


def welch(base: Values, values: Values) -> Test:
    """Welch's t-test (scipy.stats.ttest_ind, equal_var=False: `student_t.welch_p`) and the seeds it would need."""
    if len(base) < 2 or len(values) < 2:
        return Test(p_value=None, significant=False, seeds_needed=None)
    base, values = np.asarray(base, dtype=float), np.asarray(values, dtype=float)
    sd_b, sd_s = float(np.std(base, ddof=1)), float(np.std(values, ddof=1))
    difference = float(np.mean(values) - np.mean(base))
    if sd_b == 0 and sd_s == 0:
        return Test(p_value=None, significant=False, seeds_needed=None)
    with warnings.catch_warnings():  # near-identical values (simulated runs) warn about precision
        warnings.simplefilter("ignore", RuntimeWarning)
        p_value = student_t.welch_p(values, base)
    return Test(p_value=p_value, significant=p_value < ALPHA, seeds_needed=seeds_needed(difference, sd_b, sd_s))


def seeds_needed(difference: float, sd_a: float, sd_b: float, alpha: float = ALPHA, power: float = POWER) -> int | None:
    """Smallest n per setup at which a two-sided Welch t-test has ``power`` to detect ``difference``
    given these standard deviations (noncentral t, Welch-Satterthwaite degrees of freedom)."""
    if difference == 0 or (sd_a == 0 and sd_b == 0):
        return None

    def power_at(n: int) -> float:
        var = (sd_a**2 + sd_b**2) / n
        df = var**2 / ((sd_a**2 / n) ** 2 / (n - 1) + (sd_b**2 / n) ** 2 / (n - 1))
        ncp = abs(difference) / math.sqrt(var)
        if ncp > 40:  # scipy's noncentral t returns nan far out in the tail; the power is 1 there
            return 1.0
        critical = student_t.t_ppf(1 - alpha / 2, df)
        return student_t.nct_sf(critical, df, ncp) + student_t.nct_cdf(-critical, df, ncp)

    high = 2
    while power_at(high) < power:  # power grows with n: double, then bisect
        if high >= MAX_SEEDS_NEEDED:
            return MAX_SEEDS_NEEDED
        high = min(high * 2, MAX_SEEDS_NEEDED)
    low = max(high // 2, 2)
    if power_at(low) >= power:
        return low
    while high - low > 1:
        middle = (low + high) // 2
        if power_at(middle) >= power:
            high = middle
        else:
            low = middle
    return high


def _finite(value: float) -> float | None:
    value = float(value)
    return value if math.isfinite(value) else None
