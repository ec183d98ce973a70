"""The olympic score's 95% percentile-bootstrap interval, and the speedup's between two setups.

The bootstrap resamples the converged runs and keeps the observed number of non-converged ones (the
interval is conditional on it), so that every resample is scored by the same rule as the result.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
from scipy import stats

from orchestrator.insight.statistics import Interval
from orchestrator.mlperf.scoring import olympic_mean, olympic_mean_along

if TYPE_CHECKING:
    from orchestrator.insight.compare import Setup

BOOTSTRAP_RESAMPLES = 4000
BOOTSTRAP_BUDGET = 2_000_000
"""Resampled values per interval at most: a setup pooling thousands of runs gets fewer resamples
(at least `BOOTSTRAP_MIN`), each of which averages thousands of times; below 500 runs, all 4000."""
BOOTSTRAP_MIN = 999


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
    result = stats.bootstrap(
        (converged,), lambda x, axis: olympic_mean_along(x, failures, setup.drop_per_end, axis), vectorized=True,
        method="percentile", n_resamples=resamples(len(converged)), rng=np.random.default_rng(BOOTSTRAP_SEED),
    )
    return Interval(value=value, low=_finite(result.confidence_interval.low),
                    high=_finite(result.confidence_interval.high))


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

    def ratio(b: np.ndarray, s: np.ndarray, axis: int) -> np.ndarray:
        return (olympic_mean_along(b, base_failures, base.drop_per_end, axis)
                / olympic_mean_along(s, failures, setup.drop_per_end, axis))

    result = stats.bootstrap(
        (base_times, times), ratio, vectorized=True, paired=False, method="percentile",
        n_resamples=resamples(len(base_times), len(times)), rng=np.random.default_rng(BOOTSTRAP_SEED),
    )
    return Interval(value=value, low=_finite(result.confidence_interval.low),
                    high=_finite(result.confidence_interval.high))


def _converged_times(setup: Setup) -> np.ndarray:
    return np.array([s.time_to_train_ms for s in setup.converged()], dtype=float)


def _finite(value: float) -> float | None:
    value = float(value)
    return value if math.isfinite(value) else None
