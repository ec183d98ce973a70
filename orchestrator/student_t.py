"""Student's t (central and noncentral) and the two-sample t-tests, as scipy.stats computes them,
from the scipy.special functions scipy.stats itself calls (`stdtr`, `stdtrit`, `nctdtr`, the
noncentral t's survival function), without importing scipy.stats: that import alone costs more
CPU (1.3 s) than the rest of a `mltrain compare` of 10,000 runs. Each function names the scipy.stats
call it stands for; tests/core/test_student_t.py holds every one equal to it, bit for bit, on many
inputs, so a scipy that computes them otherwise fails there, not in a user's numbers.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import special

try:  # what scipy.stats.nct.sf calls; it has no public name in scipy.special
    from scipy.special._ufuncs import _nct_sf
except ImportError:  # pragma: no cover - a scipy without it: scipy.stats' own, imported then
    _nct_sf = None


def t_ppf(q: float, df: float) -> float:
    """``scipy.stats.t.ppf(q, df)`` for 0 < q < 1 (`t_gen._ppf`)."""
    return float(special.stdtrit(df, q))


def nct_cdf(x: float, df: float, nc: float) -> float:
    """``scipy.stats.nct.cdf(x, df, nc)`` for a finite ``x`` (`nct_gen._cdf`)."""
    return float(special.nctdtr(df, nc, x))


def nct_sf(x: float, df: float, nc: float) -> float:
    """``scipy.stats.nct.sf(x, df, nc)`` for a finite ``x`` (`nct_gen._sf`)."""
    if _nct_sf is None:  # pragma: no cover
        from scipy import stats

        return float(stats.nct.sf(x, df, nc))
    with np.errstate(over="ignore"):
        return float(np.clip(_nct_sf(x, df, nc), 0, 1))


def welch_p(a: Sequence[float], b: Sequence[float]) -> float:
    """``scipy.stats.ttest_ind(a, b, equal_var=False).pvalue`` (two-sided) of two samples of at least
    two values each: their means and variances as scipy.stats takes them (the variance as the mean
    squared deviation, times n / (n - 1))."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return welch_p_from_stats(np.mean(x), _variance(x), x.size, np.mean(y), _variance(y), y.size)


def welch_p_from_stats(mean1: float, var1: float, n1: int, mean2: float, var2: float, n2: int) -> float:
    """Welch's two-sided p-value from each sample's mean, variance and size
    (`scipy.stats._stats_py._unequal_var_ttest_denom` and `_ttest_ind_from_stats`)."""
    vn1, vn2 = np.asarray(var1, dtype=float) / n1, np.asarray(var2, dtype=float) / n2  # arrays, as scipy's
    with np.errstate(divide="ignore", invalid="ignore"):
        df = (vn1 + vn2) ** 2 / (vn1**2 / (n1 - 1) + vn2**2 / (n2 - 1))
        df = np.where(np.isnan(df), 1.0, df)  # no spread: any df will do, as scipy says
        t = np.divide(np.asarray(mean1, dtype=float) - np.asarray(mean2, dtype=float), np.sqrt(vn1 + vn2))
    return float(2 * special.stdtr(df, -np.abs(t)))


def pooled_p_greater(mean1: float, std1: float, n1: int, mean2: float, std2: float, n2: int) -> float:
    """``scipy.stats.ttest_ind_from_stats(mean1, std1, n1, mean2, std2, n2, equal_var=True,
    alternative="greater").pvalue``: the pooled-variance test that the first mean is greater
    (`scipy.stats._stats_py._equal_var_ttest_denom`). On 0-d arrays, as scipy's: a numpy scalar's
    ``** 2`` may round otherwise."""
    var1 = np.asarray(0.0 if n1 == 1 else np.asarray(std1, dtype=float) ** 2)
    var2 = np.asarray(0.0 if n2 == 1 else np.asarray(std2, dtype=float) ** 2)
    df = n1 + n2 - 2.0
    pooled = ((n1 - 1) * var1 + (n2 - 1) * var2) / df
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.divide(np.asarray(mean1, dtype=float) - np.asarray(mean2, dtype=float),
                      np.sqrt(pooled * (1.0 / n1 + 1.0 / n2)))
    return float(special.stdtr(df, -t))


def _variance(values: np.ndarray) -> np.ndarray:
    """The sample variance as `scipy.stats._stats_py._var` computes it (``ddof=1``)."""
    return np.asarray(np.mean((values - np.mean(values)) ** 2)) * (values.size / (values.size - 1))
