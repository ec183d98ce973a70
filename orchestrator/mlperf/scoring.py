"""Scoring a set of runs, as ``../shared/spec/scoring.md`` states the rules.

Pure functions: records in, numbers out. Milliseconds internally; the MLPerf summarizer reports
minutes, which `orchestrator.units` converts to at the edge. The olympic rule is written once
(`olympic_kept`) and used for the score, for which seeds count, and (vectorised) for bootstrap
resamples in `orchestrator.insight.compare`.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

import numpy as np

from orchestrator import sample_stdev
from orchestrator.results.records import RunRecord, Score, ScoringRule, SeedScore, Spread
from orchestrator.student_t import t_ppf


def olympic_kept(converged: int, non_converged: int, drop_per_end: int) -> slice | None:
    """MLPerf's olympic rule (`result_summarizer._compute_olympic_average`): of the converged
    runs sorted fastest first, drop ``drop_per_end`` fastest and ``drop_per_end - non_converged``
    slowest (a non-converged run counts as a dropped slow one). The slice of the sorted runs that
    is averaged; None when too many runs did not converge or nothing is left."""
    if non_converged > drop_per_end:
        return None
    kept = slice(drop_per_end, converged - (drop_per_end - non_converged))
    return kept if kept.stop > kept.start else None


def olympic_mean(converged_ms: Sequence[float], non_converged: int, drop_per_end: int) -> float | None:
    """The olympic average of the converged runs' times; None where `olympic_kept` keeps nothing."""
    kept = olympic_kept(len(converged_ms), non_converged, drop_per_end)
    if kept is None:
        return None
    counted = sorted(converged_ms)[kept]
    return sum(counted) / len(counted)


def olympic_mean_along(times_ms: np.ndarray, non_converged: int, drop_per_end: int, axis: int = -1) -> np.ndarray:
    """`olympic_mean` along ``axis`` of an array of resamples (NaN where it is undefined)."""
    ordered = np.sort(np.moveaxis(times_ms, axis, -1), axis=-1)
    kept = olympic_kept(ordered.shape[-1], non_converged, drop_per_end)
    if kept is None:
        return np.full(ordered.shape[:-1], np.nan)
    return ordered[..., kept].mean(axis=-1)


def t_interval(values: Sequence[float], confidence: float = 0.95, *,
               floor: float | None = None) -> tuple[float, float] | None:
    """Student-t interval of the mean; None for fewer than two values. ``floor``: the least value the
    quantity can take (0 for a time, a count of epochs, a rate): a bound below it (two seeds far apart
    give a t of 12.7) is the floor, never a negative time."""
    n = len(values)
    if n < 2:
        return None
    mean = statistics.fmean(values)
    half = t_ppf(0.5 + confidence / 2, n - 1) * sample_stdev.stdev(values) / math.sqrt(n)
    low = mean - half if floor is None else max(mean - half, floor)
    return low, mean + half


def spread(values: Sequence[float]) -> Spread:
    """Mean, sample standard deviation, coefficient of variation and a Student-t 95% interval
    of the mean."""
    n = len(values)
    if n == 0:
        return Spread(n=0, mean=None, std=None, cv=None, minimum=None, maximum=None, ci95_low=None, ci95_high=None)
    mean = statistics.fmean(values)
    std = sample_stdev.stdev(values) if n > 1 else None
    interval = t_interval(values, floor=0.0)
    return Spread(
        n=n,
        mean=mean,
        std=std,
        cv=(std / mean) if std is not None and mean else None,
        minimum=min(values),
        maximum=max(values),
        ci95_low=interval[0] if interval else None,
        ci95_high=interval[1] if interval else None,
    )


def score_runs(records: dict[int, RunRecord], rule: ScoringRule, *, unfinished: Sequence[int] = (),
               scaling_factor: float = 1.0) -> Score:
    """Score the finished runs of a set (seed -> record); ``unfinished`` seeds never ended.
    ``scaling_factor``: the RCP scaling factor MLCommons applies (scaling.json), kept beside the
    olympic mean with their product, the score as the result summarizer reports it."""
    converged = {seed: r for seed, r in records.items() if r.converged and r.time_to_train_ms is not None}
    non_converged = len(records) - len(converged)
    ordered = sorted(converged, key=lambda s: (converged[s].time_to_train_ms, s))
    ttt = [float(converged[s].time_to_train_ms or 0) for s in ordered]
    kept = olympic_kept(len(ordered), non_converged, rule.drop_per_end)
    counted = ordered[kept] if kept is not None else []
    slow_drop = max(rule.drop_per_end - non_converged, 0)
    fast = ordered[: rule.drop_per_end]
    slow = ordered[len(ordered) - slow_drop:] if slow_drop else []
    score = olympic_mean(ttt, non_converged, rule.drop_per_end)
    total_runs = len(records) + len(unfinished)

    problems: list[str] = []
    if unfinished:
        problems.append(f"{len(unfinished)} seed(s) never finished ({_seeds(unfinished)}): resume the run")
    if non_converged > rule.max_non_converged:
        problems.append(
            f"{non_converged} runs did not converge; at most {rule.max_non_converged} may"
            f" ({_seeds([s for s in records if s not in converged])})"
        )
    if rule.runs_required is not None and total_runs != rule.runs_required:
        problems.append(f"the rules need {rule.runs_required} runs, this set has {total_runs}")
    if score is None and not problems:
        problems.append(f"no run is left after dropping {rule.drop_per_end} at each end")
    with_epochs = [s for s in ordered if converged[s].epochs_to_target]
    return Score(
        valid=not problems,
        reason="; ".join(problems),
        score_ms=score,
        scaling_factor=scaling_factor,
        scaled_score_ms=scaled(score, scaling_factor),
        runs=total_runs,
        converged=len(converged),
        non_converged=non_converged,
        unfinished=len(unfinished),
        counted_seeds=tuple(counted),
        dropped_fast_seeds=tuple(fast),
        dropped_slow_seeds=tuple(slow),
        time_to_train_ms=spread(ttt),
        epochs_to_target=spread([float(converged[s].epochs_to_target or 0) for s in with_epochs]),
        ms_per_epoch=spread([
            float(converged[s].time_to_train_ms or 0) / float(converged[s].epochs_to_target or 1)
            for s in with_epochs
        ]),
        rule=rule,
        per_seed={
            seed: SeedScore(
                status=r.status, reason=r.reason, time_to_train_ms=r.time_to_train_ms,
                epochs_to_target=r.epochs_to_target, counted=seed in counted,
            )
            for seed, r in sorted(records.items())
        },
    )


def scaled(score_ms: float | None, scaling_factor: float) -> float | None:
    """The olympic mean as MLCommons' summarizer reports it: multiplied by the RCP scaling factor."""
    return None if score_ms is None else score_ms * scaling_factor


def _seeds(seeds: Sequence[int]) -> str:
    listed = sorted(seeds)
    return "seed " + ", ".join(map(str, listed[:10])) + (" ..." if len(listed) > 10 else "")
