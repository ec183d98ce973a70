"""The percentile bootstrap's 95% interval as ``scipy.stats.bootstrap(data, statistic, vectorized=True,
paired=False, method="percentile", n_resamples=n, rng=rng)`` computes it, without importing
scipy.stats: that import alone costs more CPU (1 to 2 s) than the rest of a `mltrain compare` of
10,000 runs. Each step names the scipy code it stands for (scipy/stats/_resampling.py and
_quantile.py); tests/core/test_percentile_bootstrap.py holds the interval equal to scipy.stats'
bit for bit on many inputs, so a scipy that draws or interpolates otherwise fails there, not in a
user's numbers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

CONFIDENCE = 0.95
"""`bootstrap`'s default ``confidence_level``: a two-sided 95% interval."""


def percentile_interval(samples: Sequence[np.ndarray], statistic: Callable[..., np.ndarray], n_resamples: int,
                        rng: np.random.Generator) -> tuple[float, float]:
    """``(low, high)`` of the interval: NaN where any resample's statistic is NaN (scipy's
    ``nan_policy="propagate"``). Each sample (of at least two values) is resampled in turn, all its
    resamples in one draw (`_bootstrap_resample`: no ``batch``), the statistic takes them along
    the last axis."""
    resampled = [sample[..., rng.integers(0, sample.shape[-1], (n_resamples, sample.shape[-1]), dtype="int64")]
                 for sample in (np.asarray(s) for s in samples)]
    distribution = np.asarray(statistic(*resampled, axis=-1))
    alpha = np.asarray((1 - CONFIDENCE) / 2, dtype=distribution.dtype)
    low, high = _linear_quantile(distribution, np.stack((alpha, 1 - alpha), axis=-1))
    return float(low), float(high)


def _linear_quantile(values: np.ndarray, p: np.ndarray) -> np.ndarray:
    """``scipy.stats.quantile(values, p, axis=-1)`` of a 1-d ``values`` (method "linear", Hyndman
    and Fan's 7th: `_quantile_iv` then `_quantile_hf`), NaN throughout where a value is NaN."""
    y = np.sort(values, axis=-1)
    n = np.asarray([y.shape[-1]], dtype=y.dtype)
    if np.any(np.isnan(y)):
        return np.full(p.shape, np.nan)
    jg = p * n + (1 - p)
    jp1 = jg // 1
    j = jp1 - 1
    g = jg % 1
    g[j < 0] = 0
    j = np.clip(j, 0.0, n - 1)
    jp1 = np.clip(jp1, 0.0, n - 1)
    return ((1 - g) * np.take_along_axis(y, j.astype(np.int64), axis=-1)
            + g * np.take_along_axis(y, jp1.astype(np.int64), axis=-1))
