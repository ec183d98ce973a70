"""Scoring a set of runs, as ``../shared/spec/scoring.md`` states the rules.

Pure functions: records in, numbers out. Milliseconds internally; the MLPerf summarizer reports
minutes, which `minutes` converts to at the edge.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from scipy import stats

from orchestrator.results.records import RunRecord


@dataclass(frozen=True, kw_only=True)
class ScoringRule:
    """How a set of runs becomes one number."""

    drop_per_end: int
    """Olympic scoring: runs dropped at the fast end; at the slow end, this less the non-converged."""
    max_non_converged: int
    """More non-converged runs than this make the result invalid."""
    runs_required: int | None = None
    """A valid result needs exactly this many runs; None: any number."""

    def __post_init__(self) -> None:
        if self.drop_per_end < 0 or self.max_non_converged < 0:
            raise ValueError("drop_per_end and max_non_converged must be >= 0")
        if self.max_non_converged > self.drop_per_end:
            raise ValueError("max_non_converged cannot exceed drop_per_end")


@dataclass(frozen=True, kw_only=True)
class Spread:
    """Descriptive statistics of one quantity over runs."""

    n: int
    mean: float | None
    std: float | None
    cv: float | None
    minimum: float | None
    maximum: float | None
    ci95_low: float | None
    ci95_high: float | None


@dataclass(frozen=True, kw_only=True)
class Score:
    valid: bool
    reason: str
    """Why the result is invalid ('' when valid)."""
    score_ms: float | None
    """Olympic mean of time-to-train."""
    runs: int
    converged: int
    non_converged: int
    unfinished: int
    counted_seeds: tuple[int, ...]
    dropped_fast_seeds: tuple[int, ...]
    dropped_slow_seeds: tuple[int, ...]
    time_to_train_ms: Spread
    """Over every converged run."""
    epochs_to_target: Spread
    ms_per_epoch: Spread
    rule: ScoringRule
    per_seed: dict[int, dict[str, Any]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def olympic_mean(converged_ms: Sequence[float], non_converged: int, drop_per_end: int) -> float | None:
    """MLPerf's olympic average: drop ``drop_per_end`` fastest and ``drop_per_end - non_converged``
    slowest converged runs (a non-converged run counts as a dropped slow one), mean of the rest.
    None when too many runs did not converge or nothing is left."""
    kept = olympic_kept(sorted(converged_ms), non_converged, drop_per_end)
    return sum(kept) / len(kept) if kept else None


def olympic_kept(sorted_ms: Sequence[float], non_converged: int, drop_per_end: int) -> list[float]:
    if non_converged > drop_per_end:
        return []
    slow_drop = drop_per_end - non_converged
    return list(sorted_ms[drop_per_end : len(sorted_ms) - slow_drop])


def spread(values: Sequence[float]) -> Spread:
    """Mean, sample standard deviation, coefficient of variation and a Student-t 95% interval
    of the mean."""
    n = len(values)
    if n == 0:
        return Spread(n=0, mean=None, std=None, cv=None, minimum=None, maximum=None, ci95_low=None, ci95_high=None)
    mean = statistics.fmean(values)
    std = statistics.stdev(values) if n > 1 else None
    if std is not None and n > 1:
        half = float(stats.t.ppf(0.975, n - 1)) * std / math.sqrt(n)
        low, high = mean - half, mean + half
    else:
        low = high = None
    return Spread(
        n=n,
        mean=mean,
        std=std,
        cv=(std / mean) if std is not None and mean else None,
        minimum=min(values),
        maximum=max(values),
        ci95_low=low,
        ci95_high=high,
    )


def score_runs(records: dict[int, RunRecord], rule: ScoringRule, *, unfinished: Sequence[int] = ()) -> Score:
    """Score the finished runs of a set (seed -> record); ``unfinished`` seeds never ended."""
    converged = {seed: r for seed, r in records.items() if r.converged and r.time_to_train_ms is not None}
    non_converged = len(records) - len(converged)
    ordered = sorted(converged, key=lambda s: (converged[s].time_to_train_ms, s))
    slow_drop = max(rule.drop_per_end - non_converged, 0)
    fast = ordered[: rule.drop_per_end]
    slow = ordered[len(ordered) - slow_drop :] if slow_drop else []
    counted = [s for s in ordered if s not in fast and s not in slow]
    total_runs = len(records) + len(unfinished)
    ttt = [float(converged[s].time_to_train_ms or 0) for s in ordered]
    score = olympic_mean(ttt, non_converged, rule.drop_per_end)

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
    epochs = [converged[s].epochs_to_target for s in ordered if converged[s].epochs_to_target]
    per_epoch = [
        float(converged[s].time_to_train_ms or 0) / float(converged[s].epochs_to_target or 1)
        for s in ordered
        if converged[s].epochs_to_target
    ]
    return Score(
        valid=not problems,
        reason="; ".join(problems),
        score_ms=score,
        runs=total_runs,
        converged=len(converged),
        non_converged=non_converged,
        unfinished=len(unfinished),
        counted_seeds=tuple(counted),
        dropped_fast_seeds=tuple(fast),
        dropped_slow_seeds=tuple(slow),
        time_to_train_ms=spread(ttt),
        epochs_to_target=spread([float(e) for e in epochs if e is not None]),
        ms_per_epoch=spread(per_epoch),
        rule=rule,
        per_seed={
            seed: {
                "status": r.status.value,
                "reason": r.reason,
                "time_to_train_ms": r.time_to_train_ms,
                "epochs_to_target": r.epochs_to_target,
                "counted": seed in counted,
            }
            for seed, r in sorted(records.items())
        },
    )


def minutes(ms: float | None) -> float | None:
    return None if ms is None else ms / 60000.0


def _seeds(seeds: Sequence[int]) -> str:
    listed = sorted(seeds)
    return "seed " + ", ".join(map(str, listed[:10])) + (" ..." if len(listed) > 10 else "")
