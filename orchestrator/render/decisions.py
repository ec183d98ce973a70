"""The seed rule of a run that decides its own seed count, and its decisions, as people read them
(`mltrain run` after each seed and at the end, `mltrain show`)."""

from __future__ import annotations

from orchestrator import text
from orchestrator.results.decisions import (
    DecisionLog,
    DecisionRule,
    DecisionStep,
    MeanDecision,
    QuantityDecision,
    Verdict,
)

LABELS = {"seconds_per_epoch": "per-epoch speed", "samples_per_second": "samples/s",
          "time_to_train_s": "time-to-train"}


def rule_line(rule: DecisionRule) -> str:
    """What the rule is: until what, at most how many seeds, by which method."""
    if rule.mode == "until_decided":
        runs = ", ".join(rule.reference_run_ids)
        until = (f"until decided against {rule.against} ({runs}): faster, slower, or equivalent within"
                 f" +-{text.percent(rule.margin)}; speed is this run's over the reference's, > 1x faster")
    else:
        until = (f"until the mean time-to-train is known to +-{text.percent(rule.width)} (the geometric mean of the"
                 " per-seed times; the result is still scored by the profile's olympic rule)")
    return f"seeds: {until}; at most {rule.max_seeds} seeds; {rule.method}"


def decision_lines(log: DecisionLog) -> list[str]:
    """The rule, where each quantity stands after the last seed, and the conclusion."""
    step = log.last
    if step is None:
        return [rule_line(log.rule), "no seed has finished yet"]
    return [rule_line(log.rule), *(f"  {part}" for part in _parts(log.rule, step)), conclusion(log.rule, step)]


def step_line(log: DecisionLog) -> str:
    """One status line after a seed: where things stand and whether another seed runs."""
    step = log.last
    if step is None:
        return "no seed has finished yet"
    then = "another seed" if step.goes_on else conclusion(log.rule, step)
    return f"after {step.seeds} seed(s): {'; '.join(_parts(log.rule, step))}: {then}"


def conclusion(rule: DecisionRule, step: DecisionStep) -> str:
    """'decided after 5 seeds: faster (per-epoch speed)', or 'undecided after 20 seeds; the
    interval is ...' for what the seed budget left undecided."""
    if step.mean is not None:
        reach = _mean_interval(step.mean)
        if step.outcome == "decided":
            return f"decided after {step.seeds} seeds: the mean time-to-train is {reach}"
        return f"undecided after {step.seeds} seeds; the interval is {reach}, wider than +-{text.percent(rule.width)}"
    if step.outcome == "going_on":
        return f"going on after {step.seeds} seeds"
    deciding = [c for c in step.comparisons if c.quantity in (rule.primary, "time_to_train_s")]
    decided = [f"{_verdict(rule, c)} ({LABELS[c.quantity]})" for c in deciding if c.verdict is not Verdict.UNDECIDED]
    if step.outcome == "decided":
        return f"decided after {step.seeds} seeds: {'; '.join(decided)}"
    undecided = [f"undecided after {step.seeds} seeds; the interval is {_speed(c.low)}-{_speed(c.high)}"
                 f" ({LABELS[c.quantity]})" for c in deciding if c.verdict is Verdict.UNDECIDED]
    return "; ".join([*(f"{part} after {step.seeds} seeds" for part in decided), *undecided])


def _parts(rule: DecisionRule, step: DecisionStep) -> list[str]:
    if step.mean is not None:
        return [f"time-to-train {_mean_interval(step.mean)} (n {step.mean.n})"]
    return [_comparison(rule, c) for c in step.comparisons]


def _comparison(rule: DecisionRule, c: QuantityDecision) -> str:
    interval = text.bounds(c.low, c.high, _speed, label="95% CS ")
    return f"{LABELS[c.quantity]} {_speed(c.speed)}{interval} {_verdict(rule, c)} (n {c.n} vs {c.reference_n})"


def _verdict(rule: DecisionRule, c: QuantityDecision) -> str:
    if c.verdict is Verdict.EQUIVALENT:
        return f"equivalent within the +-{text.percent(rule.margin)} margin"
    if c.verdict is Verdict.UNDECIDED and not c.within_reach and c.n:
        return f"undecided: cannot be decided within {rule.max_seeds} seeds at its spread"
    return c.verdict.value


def _mean_interval(mean: MeanDecision) -> str:
    if mean.mean_ms is None:
        return "not measured yet"
    if mean.low_ms is None or mean.high_ms is None or mean.relative_half_width is None:
        return f"{text.duration(mean.mean_ms)} (interval still open)"
    interval = text.bounds(mean.low_ms, mean.high_ms, text.duration, label="95% CS ")
    return f"{text.duration(mean.mean_ms)}{interval} (+-{text.percent(mean.relative_half_width)})"


def _speed(value: float | None) -> str:
    return "?" if value is None else text.number(value, "x")
