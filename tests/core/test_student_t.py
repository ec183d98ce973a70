"""`orchestrator.student_t` computes what scipy.stats computes, bit for bit, without importing it."""

from __future__ import annotations

import math
import subprocess
import sys
import warnings

import numpy as np
from scipy import stats

from orchestrator import student_t

RNG = np.random.default_rng(36)


def same(ours: float, theirs: float) -> bool:
    """Equal to the last bit, or both NaN."""
    return (math.isnan(ours) and math.isnan(theirs)) or ours == theirs


def samples() -> list[tuple[np.ndarray, np.ndarray]]:
    """Pairs of samples as comparisons hold them: times of a few to thousands of seeds, alike and
    apart, spread and nearly identical, integers (epochs) and one sample without spread."""
    pairs = []
    for _ in range(150):
        n1, n2 = RNG.integers(2, 12, size=2) if RNG.random() < 0.7 else RNG.integers(2, 3000, size=2)
        scale = 10.0 ** RNG.uniform(-3, 7)
        a = RNG.normal(scale, scale * RNG.uniform(1e-9, 0.5), n1)
        b = RNG.normal(scale * RNG.uniform(0.5, 1.5), scale * RNG.uniform(1e-9, 0.5), n2)
        pairs.append((a, b))
    pairs += [(RNG.integers(20, 40, n).astype(float), RNG.integers(20, 40, n).astype(float)) for n in range(2, 30)]
    pairs += [(np.full(5, 3.0), np.array([1.0, 2.0, 3.0])), (np.array([1.0, 2.0]), np.array([1.0, 2.0]))]
    return pairs


def test_t_ppf_is_scipy_stats():
    for q in (0.5 + 0.95 / 2, 0.975, 0.9, 0.995, *RNG.uniform(0.001, 0.999, 40)):
        for df in (1, 2, 3.5, 7, 29, 1e3, 1e6, *10 ** RNG.uniform(-1, 7, 20)):
            assert same(student_t.t_ppf(q, df), float(stats.t.ppf(q, df))), (q, df)


def test_noncentral_t_is_scipy_stats():
    for _ in range(600):
        df, nc = 10 ** RNG.uniform(0, 6), RNG.uniform(0, 40)
        x = float(stats.t.ppf(RNG.choice([0.975, 0.995, 0.9]), df)) * RNG.choice([1, -1])
        assert same(student_t.nct_sf(x, df, nc), float(stats.nct.sf(x, df, nc))), (x, df, nc)
        assert same(student_t.nct_cdf(x, df, nc), float(stats.nct.cdf(x, df, nc))), (x, df, nc)


def test_welch_is_scipy_stats_ttest_ind():
    with np.errstate(all="ignore"), warnings.catch_warnings():  # nearly identical values warn in scipy
        warnings.simplefilter("ignore")
        for a, b in samples():
            theirs = float(stats.ttest_ind(a, b, equal_var=False).pvalue)
            assert same(student_t.welch_p(a, b), theirs), (a, b)
            assert same(student_t.welch_p(list(a), list(b)), theirs)


def test_pooled_greater_is_scipy_stats_ttest_ind_from_stats():
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for a, b in samples():
            for n1, n2 in ((a.size, b.size), (1, b.size), (a.size, 1)):
                m1, s1 = float(np.mean(a)), float(np.std(a, ddof=1))
                m2, s2 = float(np.mean(b)), float(np.std(b, ddof=1))
                theirs = stats.ttest_ind_from_stats(m1, s1, n1, m2, s2, n2, equal_var=True, alternative="greater")
                assert same(student_t.pooled_p_greater(m1, s1, n1, m2, s2, n2), float(theirs.pvalue)), (m1, s1, n1)


def test_importing_it_imports_no_scipy_stats():
    code = "import sys, orchestrator.student_t; print('scipy.stats' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip() == "False"
