"""`orchestrator.percentile_bootstrap` computes scipy.stats.bootstrap's percentile interval, bit for
bit, without importing scipy.stats (tests/hardware/test_compare.py: `mltrain compare` imports none)."""

from __future__ import annotations

import math
import subprocess
import sys
import warnings

import numpy as np
from scipy import stats

from orchestrator.insight.bootstrap import BOOTSTRAP_SEED, resamples
from orchestrator.mlperf.scoring import olympic_mean_along
from orchestrator.percentile_bootstrap import percentile_interval

RNG = np.random.default_rng(36)


def same(ours: float, theirs: float) -> bool:
    """Equal to the last bit, or both NaN."""
    return (math.isnan(ours) and math.isnan(theirs)) or ours == theirs


def theirs(samples: tuple[np.ndarray, ...], statistic, n: int) -> tuple[float, float]:
    with np.errstate(all="ignore"), warnings.catch_warnings():  # a degenerate interval warns in scipy
        warnings.simplefilter("ignore")
        result = stats.bootstrap(samples, statistic, vectorized=True, paired=False, method="percentile",
                                 n_resamples=n, rng=np.random.default_rng(BOOTSTRAP_SEED))
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def ours(samples: tuple[np.ndarray, ...], statistic, n: int) -> tuple[float, float]:
    with np.errstate(all="ignore"):
        return percentile_interval(samples, statistic, n, np.random.default_rng(BOOTSTRAP_SEED))


def times(n: int) -> np.ndarray:
    """Times to train as runs hold them: milliseconds, integers or not, spread or nearly alike, ties."""
    scale = 10.0 ** RNG.uniform(3, 8)
    if RNG.random() < 0.3:
        return RNG.integers(20, 40, n).astype(float) * scale
    return RNG.normal(scale, scale * RNG.uniform(1e-9, 0.3), n)


def test_one_sample_olympic_interval_is_scipy_stats_bootstrap():
    for _ in range(120):
        n = int(RNG.integers(2, 12)) if RNG.random() < 0.7 else int(RNG.integers(12, 600))
        failures, drop = int(RNG.integers(0, 4)), int(RNG.integers(0, 3))
        sample = times(n)

        def olympic(x, axis, failures=failures, drop=drop):
            return olympic_mean_along(x, failures, drop, axis)

        count = resamples(n) if RNG.random() < 0.8 else int(RNG.integers(1, 50))
        a, b = ours((sample,), olympic, count), theirs((sample,), olympic, count)
        assert same(a[0], b[0]) and same(a[1], b[1]), (n, failures, drop, count, a, b)


def test_two_sample_ratio_interval_is_scipy_stats_bootstrap():
    for _ in range(80):
        n1, n2 = (RNG.integers(2, 12, size=2) if RNG.random() < 0.7 else RNG.integers(12, 400, size=2)).tolist()
        f1, f2, d1, d2 = RNG.integers(0, 3, size=4).tolist()
        base, setup = times(n1), times(n2)

        def ratio(b, s, axis, f1=f1, f2=f2, d1=d1, d2=d2):
            return olympic_mean_along(b, f1, d1, axis) / olympic_mean_along(s, f2, d2, axis)

        count = resamples(n1, n2)
        a, b = ours((base, setup), ratio, count), theirs((base, setup), ratio, count)
        assert same(a[0], b[0]) and same(a[1], b[1]), (n1, n2, f1, f2, d1, d2, a, b)


def test_undefined_and_infinite_resamples_are_scipy_stats():
    """Resamples whose statistic is NaN (every run dropped) or infinite (a ratio over zero)."""
    cases = [
        ((np.array([1.0, 2.0, 3.0]),), lambda x, axis: olympic_mean_along(x, 5, 1, axis)),
        ((np.array([1.0, np.nan, 3.0]),), lambda x, axis: np.mean(x, axis=axis)),
        ((np.array([0.0, 1.0, 2.0]), np.array([0.0, 0.0, 1.0])), lambda b, s, axis: b.mean(axis) / s.mean(axis)),
        ((np.array([5.0, 5.0]),), lambda x, axis: np.mean(x, axis=axis)),
    ]
    for samples, statistic in cases:
        a, b = ours(samples, statistic, 999), theirs(samples, statistic, 999)
        assert same(a[0], b[0]) and same(a[1], b[1]), (samples, a, b)


def test_importing_it_imports_no_scipy_stats():
    code = "import sys, orchestrator.insight.bootstrap; print('scipy.stats' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip() == "False"
