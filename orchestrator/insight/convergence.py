"""A setup's convergence beside MLCommons' reference convergence points (RCPs).

The RCP checker (`orchestrator.mlperf.checkers`) only asks whether a result converges suspiciously
*fast*. Here the same reference also says when a setup converges *slower* than it would (a numerics
or hyperparameter regression: a different precision, a changed learning rate), and how long the
setup would take to train had it converged as the reference does.

- **Reference**: the RCP the checker holds the setup's global batch size to (found or interpolated,
  pruned table), in epochs: a table counting samples (unet3d since training 3.1) is divided by the
  setup's samples per epoch, the unit its logs count in.
- **Slower than the reference** (`SLOWER_ALPHA`): the one-sided two-sample t-test with equal
  variances that the RCP checker runs for "faster" (``scipy.stats.ttest_ind_from_stats``), turned
  round: the setup's olympic mean epochs-to-target against the RCP mean, with the setup's own
  standard deviation and run count, is greater at alpha 0.05.
- **Faster than allowed**: the olympic mean is below the lowest mean the checker accepts.
- **Time-to-train at the reference's convergence**: olympic time-to-train x RCP mean / olympic mean
  epochs-to-target. This is MLCommons' RCP normalisation (``rcp_checker._find_norm_factor``: RCP
  mean / submission mean), applied in both directions, where MLCommons scales only results that
  converge faster than the RCP mean.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from orchestrator import student_t
from orchestrator.mlperf.scoring import olympic_kept

SLOWER_ALPHA = 0.05
"""The RCP checker's own alpha, for the mirrored test."""
Verdict = Literal["slower", "faster_than_allowed", "as_reference", "too_few_runs"]


@dataclass(frozen=True, kw_only=True)
class Reference:
    """The RCP for one setup, in epochs."""

    ruleset: str
    batch_size: int
    how: str
    """The checker's words: 'RCP found' or 'RCP Interpolation'."""
    mean_epochs: float
    stdev_epochs: float
    min_mean_epochs: float
    """The lowest mean epochs-to-target the RCP checker accepts."""
    runs: int


@dataclass(frozen=True, kw_only=True)
class ConvergenceCheck:
    """One setup's epochs-to-target against its reference."""

    reference: Reference
    olympic_epochs: float | None
    """Olympic mean of the setup's epochs-to-target (the checker's rule: sort, drop at each end)."""
    stdev_epochs: float | None
    runs: int
    """Runs in that mean."""
    p_slower: float | None
    """One-sided t-test p-value of 'converges slower than the reference'."""
    verdict: Verdict
    ttt_at_reference_ms: float | None
    """Olympic time-to-train x RCP mean / olympic mean epochs-to-target."""


def reference_for(benchmark: str | None, ruleset: str, batch_size: int | None,
                  samples_per_epoch: int | None) -> Reference | None:
    """The checker's RCP for the batch size in epochs; None without a benchmark, a batch size, a
    point in the table, or (for a table counting samples) the samples per epoch to convert it."""
    from orchestrator.mlperf import checkers

    if not benchmark or not batch_size:
        return None
    point = checkers.rcp_point(benchmark, ruleset, batch_size)
    if point is None or (point.counts_samples and not samples_per_epoch):
        return None
    unit = float(samples_per_epoch) if point.counts_samples and samples_per_epoch else 1.0
    return Reference(ruleset=ruleset, batch_size=batch_size, how=point.how, mean_epochs=point.mean / unit,
                     stdev_epochs=point.stdev / unit, min_mean_epochs=point.min_mean / unit, runs=point.runs)


def check(reference: Reference, epochs: Sequence[float], non_converged: int, drop_per_end: int,
          olympic_ms: float | None) -> ConvergenceCheck:
    """``epochs``: the converged seeds' epochs-to-target."""
    ordered = sorted(epochs)
    kept = olympic_kept(len(ordered), non_converged, drop_per_end)
    chosen = ordered[kept] if kept is not None else []
    if len(chosen) < 2:
        return ConvergenceCheck(reference=reference, olympic_epochs=float(np.mean(chosen)) if chosen else None,
                                stdev_epochs=None, runs=len(chosen), p_slower=None, verdict="too_few_runs",
                                ttt_at_reference_ms=None)
    mean, stdev = float(np.mean(chosen)), float(np.std(ordered, ddof=1))
    p = student_t.pooled_p_greater(mean, stdev, len(chosen), reference.mean_epochs, reference.stdev_epochs,
                                   reference.runs)
    p_slower = float(p) if math.isfinite(p) else None
    verdict: Verdict = "as_reference"
    if mean < reference.min_mean_epochs:
        verdict = "faster_than_allowed"
    elif p_slower is not None and p_slower < SLOWER_ALPHA:
        verdict = "slower"
    at_reference = olympic_ms * reference.mean_epochs / mean if olympic_ms is not None else None
    return ConvergenceCheck(reference=reference, olympic_epochs=mean, stdev_epochs=stdev, runs=len(chosen),
                            p_slower=p_slower, verdict=verdict, ttt_at_reference_ms=at_reference)
