"""Decisions taken after every seed that keep their error rate however often they are taken.

A confidence sequence is a sequence of intervals that holds the true value at every seed count
at once with probability 1 - alpha, so a run may stop on whatever it has seen (Howard, Ramdas,
McAuliffe & Sekhon 2021, "Time-uniform, nonparametric, nonasymptotic confidence sequences",
Ann. Statist. 49(2)). The one used here is the t-confidence sequence for a normal mean with
unknown variance of Wang & Ramdas ("Anytime-valid t-tests and confidence sequences for Gaussian
means with unknown variance", arXiv:2310.03722, 2024), T. L. Lai's construction ("On confidence
sequences", Ann. Statist. 4(2), 1976) with a normal mixture in place of his flat one: the
likelihood ratio of the scale-invariant statistics, mixed over a normal prior on the standardized
effect, is a nonnegative martingale under the null, Ville's inequality bounds its crossing of
1/alpha at any seed count, and the values it does not reject form the interval, in closed form
(`half_width`). Everything is on the log of the per-seed quantity, so a difference is a ratio and
"6% faster" reads the same from either side.

Two setups: the new run's seeds arrive one at a time, the reference's are stored and fixed. The
interval of the difference of mean logs is the new run's confidence sequence at alpha/2 widened
by the reference's Student-t interval at alpha/2 (`scoring.t_interval`): both hold together with
probability >= 1 - alpha (a union bound), whatever the two spreads are (no equal-variance
assumption). A setup alone (`--seeds auto`): the sequence of its mean log at alpha.

The guarantee takes the per-seed log values to be normal; tests/hardware/test_sequential.py
measures the rule on seeds drawn from MLCommons' published unet3d runs, which are not.

Pure functions of numbers; the arrays may carry leading axes (simulations), seeds on the last.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from orchestrator.insight.statistics import ALPHA, Interval, Values
from orchestrator.mlperf.scoring import t_interval
from orchestrator.results.decisions import Verdict

PRECISION = 0.25
"""Precision of the normal prior on the standardized effect (difference / spread) that the
mixture averages over: a prior standard deviation of 2 spreads, sized for hardware differences
of a few per-epoch spreads; it makes the interval finite from the 4th seed at alpha/2."""
METHOD = ("normal-mixture t-confidence sequence on log values (Wang & Ramdas 2024, arXiv:2310.03722, after"
          " Lai 1976), 95% at every seed count")
"""The method, as records and help texts name it."""


def half_width(n: np.ndarray | float, sum_sq: np.ndarray | float, alpha: float,
               precision: float = PRECISION) -> np.ndarray:
    """Half-width of the t-confidence sequence for a normal mean after ``n`` values whose squared
    deviations from their mean sum to ``sum_sq``; infinite until the mixture's evidence can reach
    1/alpha (few values).

    The mixture martingale at mean mu is sqrt(c/(n+c)) (V / (V - S^2/(n+c)))^(n/2), with V and S
    the sum of squares and the sum of the values less mu, and c the prior's precision; it stays
    below 1/alpha exactly when (mean - mu)^2 < (K-1) Q (n+c) / (n (n - (K-1) c)), with
    K = (sqrt((n+c)/c) / alpha)^(2/n) and Q = ``sum_sq``."""
    n = np.asarray(n, dtype=float)
    q = np.asarray(sum_sq, dtype=float)
    c = precision
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        k = (np.sqrt((n + c) / c) / alpha) ** (2 / n)
        room = n - (k - 1) * c
        width = np.sqrt((k - 1) * q * (n + c) / (n * room))
    return np.where((n >= 2) & (room > 0), width, np.inf)


def least_seeds(alpha: float, precision: float = PRECISION) -> int:
    """The fewest values at which the sequence can be finite: no decision comes sooner."""
    n = 2
    while not math.isfinite(float(half_width(n, 1.0, alpha, precision))):
        n += 1
    return n


@dataclass(frozen=True, kw_only=True)
class Track:
    """A confidence sequence after each prefix of the values (last axis): the estimate and its interval."""

    estimate: np.ndarray
    low: np.ndarray
    high: np.ndarray


def mean_path(logs: np.ndarray, alpha: float = ALPHA) -> Track:
    """The sequence of the mean of ``logs`` after 1, 2, ... values."""
    logs = np.asarray(logs, dtype=float)
    n = np.arange(1, logs.shape[-1] + 1)
    total = np.cumsum(logs, axis=-1)
    mean = total / n
    sum_sq = np.maximum(np.cumsum(logs**2, axis=-1) - total * mean, 0.0)
    width = half_width(n, sum_sq, alpha)
    return Track(estimate=mean, low=mean - width, high=mean + width)


def reference_interval(reference_logs: Sequence[float], alpha: float = ALPHA) -> tuple[float, float]:
    """The fixed reference's mean log and the half-width of its Student-t interval at alpha/2 (the
    reference's share of the error rate); infinite below two values."""
    mean = float(np.mean(reference_logs))
    interval = t_interval(list(reference_logs), 1 - alpha / 2)
    return mean, (math.inf if interval is None else (interval[1] - interval[0]) / 2)


def difference_path(logs: np.ndarray, reference_mean: np.ndarray | float, reference_half: np.ndarray | float,
                    alpha: float = ALPHA) -> Track:
    """The sequence of mean(new logs) - mean(reference logs) after 1, 2, ... new values: the new
    run's sequence at alpha/2 widened by the reference's half-width (`reference_interval`)."""
    own = mean_path(logs, alpha / 2)
    estimate = own.estimate - reference_mean
    width = (own.high - own.estimate) + reference_half
    return Track(estimate=estimate, low=estimate - width, high=estimate + width)


def verdicts(low: np.ndarray, high: np.ndarray, margin: float, *, higher_is_better: bool) -> np.ndarray:
    """The verdict of each interval of log(new / reference): a difference once it excludes 0 (the
    new setup faster or slower, by the quantity's direction), else equivalent once it lies inside
    +-log(1 + margin), else undecided."""
    low, high = np.asarray(low, dtype=float), np.asarray(high, dtype=float)
    bound = math.log1p(margin)
    above, below = low > 0, high < 0
    return np.select(
        [above, below, (low > -bound) & (high < bound)],
        [Verdict.FASTER.value if higher_is_better else Verdict.SLOWER.value,
         Verdict.SLOWER.value if higher_is_better else Verdict.FASTER.value, Verdict.EQUIVALENT.value],
        Verdict.UNDECIDED.value,
    )


@dataclass(frozen=True, kw_only=True)
class Standing:
    """One quantity of the new setup against the reference, after the seeds so far."""

    n: int
    """New values so far."""
    reference_n: int
    speed: Interval
    """How many times faster the new setup is (reference / new for times, new / reference for
    rates; > 1 is faster), with its confidence sequence."""
    verdict: Verdict
    reach: float
    """Half-width on the log scale the sequence would have at the seed budget if the new values
    kept the spread they have (infinite while there are too few to say)."""


def against_reference(values: Values, reference: Sequence[float], *, higher_is_better: bool,
                      margin: float, budget: int, alpha: float = ALPHA) -> Standing:
    """Where the new setup's per-seed ``values`` stand against the ``reference`` values (positive
    numbers; at least two reference values), and the width they would reach at ``budget`` values."""
    if len(reference) < 2:
        raise ValueError("a comparison needs at least two reference values")
    ref_mean, ref_half = reference_interval(np.log(reference), alpha)
    if not len(values):
        return Standing(n=0, reference_n=len(reference), speed=Interval(value=None, low=None, high=None),
                          verdict=Verdict.UNDECIDED, reach=math.inf)
    logs = np.log(np.asarray(values, dtype=float))
    path = difference_path(logs, ref_mean, ref_half, alpha)
    estimate, low, high = float(path.estimate[-1]), float(path.low[-1]), float(path.high[-1])
    verdict = Verdict(str(verdicts(np.array(low), np.array(high), margin, higher_is_better=higher_is_better)))
    sign = 1.0 if higher_is_better else -1.0
    ends = sorted((sign * low, sign * high))
    speed = Interval(value=math.exp(sign * estimate), low=_exp(ends[0]), high=_exp(ends[1]))
    spread = float(np.var(logs, ddof=1)) if len(logs) > 1 else math.nan
    reach = (float(half_width(budget, (budget - 1) * spread, alpha / 2)) + ref_half
             if budget > len(logs) and math.isfinite(spread) else high - estimate)
    return Standing(n=len(logs), reference_n=len(reference), speed=speed, verdict=verdict, reach=reach)


def can_still_decide(standing: Standing, margin: float) -> bool:
    """Whether the interval could still decide by the budget at the spread seen: narrower than the
    difference seen (a difference) or than the margin (equivalence)."""
    if standing.verdict is not Verdict.UNDECIDED:
        return False
    if standing.speed.value is None or not math.isfinite(standing.reach):
        return True
    return standing.reach < max(abs(math.log(standing.speed.value)), math.log1p(margin))


def geometric_mean_sequence(values: Values, alpha: float = ALPHA) -> Interval:
    """The geometric mean of positive ``values`` with its confidence sequence (the mean of their
    logs, exponentiated): the typical per-seed value, not an olympic score."""
    if not len(values):
        return Interval(value=None, low=None, high=None)
    path = mean_path(np.log(np.asarray(values, dtype=float)), alpha)
    return Interval(value=math.exp(float(path.estimate[-1])), low=_exp(float(path.low[-1])),
                    high=_exp(float(path.high[-1])))


def relative_half_width(interval: Interval) -> float:
    """How far the interval reaches from its value, as a fraction of it (infinite when open)."""
    if interval.value is None or interval.high is None:
        return math.inf
    return interval.high / interval.value - 1


def _exp(value: float) -> float | None:
    """exp of a log bound; None for an open (infinite) end."""
    return math.exp(value) if math.isfinite(value) else None
