"""The olympic score's 95% percentile-bootstrap interval, and the speedup's between two setups.

Above `LARGE_SAMPLE` runs, their normal approximation. The bootstrap resamples the converged runs and
keeps the observed number of non-converged ones (the interval is conditional on it), so that every
resample is scored by the same rule as the result. The bootstrap is scipy.stats', computed without
importing scipy.stats (`orchestrator.percentile_bootstrap`): its import costs more than the rest of a
comparison of 10,000 runs.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from orchestrator.insight.statistics import Interval
from orchestrator.mlperf.scoring import olympic_kept, olympic_mean, olympic_mean_along
from orchestrator.percentile_bootstrap import percentile_interval

if TYPE_CHECKING:
    from orchestrator.insight.compare import Setup

BOOTSTRAP_RESAMPLES = 4000
BOOTSTRAP_BUDGET = 2_000_000
"""Resampled values per interval at most: a setup pooling thousands of runs gets fewer resamples
(at least `BOOTSTRAP_MIN`), each of which averages thousands of times; below 500 runs, all 4000."""
BOOTSTRAP_MIN = 999
LARGE_SAMPLE = 2000
"""Above this many converged runs in a setup, the olympic interval is the normal approximation of a
trimmed mean (its standard error from the runs it keeps), not the bootstrap: at that size the two
agree within the bootstrap's own resampling error, and its resamples cost seconds an interval (a
comparison of 2 x 5,000 runs took 20 s, of 2 x 50,000 minutes)."""
Z_95 = 1.959963984540054
"""The standard normal's 97.5th percentile: a two-sided 95% interval."""


def resamples(*sizes: int) -> int:
    """How many bootstrap resamples for samples of ``sizes`` (see `BOOTSTRAP_BUDGET`)."""
    return max(BOOTSTRAP_MIN, min(BOOTSTRAP_RESAMPLES, BOOTSTRAP_BUDGET // max(sum(sizes), 1)))
BOOTSTRAP_SEED = 20240607


def olympic_interval(setup: Setup) -> Interval:
    """Olympic time-to-train with a 95% percentile-bootstrap interval. The bootstrap resamples the
    converged runs and keeps the observed number of non-converged ones (the interval is
    conditional on it), so that every resample is scored by the same rule as the result."""
    converged = _converged_times(setup)
    failures = len(setup.seeds) - len(converged)
    value = olympic_mean(list(converged), failures, setup.drop_per_end)
    if value is None or len(converged) - 2 * setup.drop_per_end + failures < 2:
        return Interval(value=value, low=None, high=None)
    if len(converged) > LARGE_SAMPLE:
        half = Z_95 * _olympic_error(converged, failures, setup.drop_per_end)
        return Interval(value=value, low=_finite(value - half), high=_finite(value + half))
    low, high = percentile_interval(
        (converged,), lambda x, axis: olympic_mean_along(x, failures, setup.drop_per_end, axis),
        resamples(len(converged)), np.random.default_rng(BOOTSTRAP_SEED),
    )
    return Interval(value=value, low=_finite(low), high=_finite(high))


def speedup_interval(base: Setup, setup: Setup) -> Interval:
    """Baseline olympic time / setup olympic time (>1: faster than the baseline), with a 95%
    percentile-bootstrap interval resampling both setups' converged runs independently."""
    base_score, score = olympic_interval(base), olympic_interval(setup)
    if base_score.value is None or score.value is None:
        return Interval(value=None, low=None, high=None)
    value = base_score.value / score.value
    if None in (base_score.low, score.low):
        return Interval(value=value, low=None, high=None)
    base_times, times = _converged_times(base), _converged_times(setup)
    base_failures, failures = len(base.seeds) - len(base_times), len(setup.seeds) - len(times)
    if max(len(base_times), len(times)) > LARGE_SAMPLE:  # the delta method on the log ratio
        spread = Z_95 * math.hypot(_olympic_error(base_times, base_failures, base.drop_per_end) / base_score.value,
                                   _olympic_error(times, failures, setup.drop_per_end) / score.value)
        return Interval(value=value, low=_finite(value * math.exp(-spread)), high=_finite(value * math.exp(spread)))

    def ratio(b: np.ndarray, s: np.ndarray, axis: int) -> np.ndarray:
        return (olympic_mean_along(b, base_failures, base.drop_per_end, axis)
                / olympic_mean_along(s, failures, setup.drop_per_end, axis))

    low, high = percentile_interval((base_times, times), ratio, resamples(len(base_times), len(times)),
                                    np.random.default_rng(BOOTSTRAP_SEED))
    return Interval(value=value, low=_finite(low), high=_finite(high))


def _olympic_error(times: np.ndarray, failures: int, drop_per_end: int) -> float:
    """The standard error of an olympic mean (a lightly trimmed mean) of many runs: the standard
    deviation of the runs it keeps over the square root of their number."""
    kept = np.sort(times)[olympic_kept(len(times), failures, drop_per_end) or slice(0, 0)]
    return float(np.std(kept, ddof=1) / math.sqrt(len(kept))) if len(kept) > 1 else math.nan


def _converged_times(setup: Setup) -> np.ndarray:
    return np.array([s.time_to_train_ms for s in setup.converged()], dtype=float)


def _finite(value: float) -> float | None:
    value = float(value)
    return value if math.isfinite(value) else None
