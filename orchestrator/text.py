"""The one set of text formatters: every number, interval and test result a person reads (terminal
tables, the HTML report, the reasons a check or a verdict gives) is written by these functions.

It sits below every room, beside `orchestrator.units`: the rooms that write a reason into a record
(qualification's judge, its floors) format its numbers here, as `orchestrator.render` does for what it
lays out, so there is one way to write a number and no room imports the presentation layer."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from orchestrator import units

if TYPE_CHECKING:  # insight.compare loads scipy: not needed to format a number (qualification on a bare GPU node)
    from orchestrator.insight.statistics import Interval, Test

Format = Callable[[float | None], str]


def seconds(ms: float | None) -> str:
    """Milliseconds as seconds with one decimal ('12.3'), '-' when there is none."""
    return "-" if ms is None else f"{ms / 1000:.1f}"


def duration(ms: float | None) -> str:
    """'12.3 s' below two minutes, '4.56 min' up to two days, '3.5 days' above, '-' when there is none."""
    if ms is None:
        return "-"
    value = ms / 1000
    if value >= 2 * 86_400:
        return f"{number(value / 86_400)} days"
    return f"{value:.3g} s" if value < 120 else f"{value / 60:.4g} min"


def minutes(ms: float | None) -> str:
    """Milliseconds as minutes with three decimals ('12.345 min'), '-' when there is none."""
    value = units.minutes(ms)
    return "-" if value is None else f"{value:.3f} min"


def summarizer_minutes(value: float | None) -> str:
    """A score in minutes as MLCommons' summarizer gives it, to six decimals; 'no score' without one."""
    return "no score" if value is None else f"{value:.6f} min"


def number(value: float | None, suffix: str = "") -> str:
    """A value as tables show it (4 significant digits; from 10,000 up a whole number with its
    thousands separated, '11,310' rather than '1.131e+04'), '-' when there is none."""
    if value is None:
        return "-"
    if math.isfinite(value) and abs(value) >= 1e4:
        digits = math.floor(math.log10(abs(value))) + 1
        return f"{round(value, 4 - digits):,.0f}{suffix}"
    return f"{value:.4g}{suffix}"


def exact(value: float) -> str:
    """A value as given, not rounded (a bound, an option): a whole number with its thousands
    separated ('65,536'), any other in the shortest form that reads back the same ('0.001', '1e-300')."""
    if math.isfinite(value) and float(value).is_integer() and abs(value) < 1e16:
        return f"{int(value):,}"
    return repr(float(value)) if math.isfinite(value) else str(value)


def percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def share(fraction: float | None) -> str:
    """A share as a whole percent ('78%'), '<1%' for a small non-zero one, '-' when there is none."""
    if fraction is None:
        return "-"
    if 0 < fraction < 0.005:
        return "<1%"
    return f"{fraction:.0%}"


def energy(joules: float | None) -> str:
    if joules is None:
        return "-"
    return f"{joules / 3.6e6:.3g} kWh" if joules >= 3.6e5 else f"{joules / 1000:.3g} kJ"


def interval(value: Interval, fmt: Format = number, *, label: str = "") -> str:
    """' [low, high]' after a value (' [95% CI low, high]' with a label), '' when unknown."""
    return bounds(value.low, value.high, fmt, label=label)


def bounds(low: float | None, high: float | None, fmt: Format = number, *, label: str = "") -> str:
    """`interval` of two ends given apart: ' [low, high]', '?' for an unknown end, '' when both are."""
    if low is None and high is None:
        return ""
    return f" [{label}{fmt(low) if low is not None else '?'}, {fmt(high) if high is not None else '?'}]"


def with_interval(value: Interval, fmt: Format = number) -> str:
    """'1.25x [1.1, 1.4]'-style: the value and its interval."""
    return fmt(value.value) + interval(value, fmt)


def p_value(test: Test | None, *, starred: bool = True) -> str:
    """'0.012 *' (significant), '0.3', 'n/a' (not testable), '-' (no test); no star where nothing
    may be decided (``starred`` False: a smoke run, a disturbed host)."""
    if test is None:
        return "-"
    if test.p_value is None:
        return "n/a"
    return f"{test.p_value:.2g}" + (" *" if test.significant and starred else "")


def seeds_needed(test: Test | None) -> str:
    """Seeds per setup needed to resolve a difference; the search's ceiling shows as '>=N'."""
    from orchestrator.insight.statistics import MAX_SEEDS_NEEDED

    if test is None or test.seeds_needed is None:
        return "-"
    if test.seeds_needed >= MAX_SEEDS_NEEDED:
        return f">={MAX_SEEDS_NEEDED:,}"
    return f"{test.seeds_needed:,}"


def test_sentence(test: Test, *, attributable: bool = True) -> str:
    """What a Welch test says, in words (of a difference that cannot be the setups', only the numbers)."""
    if test.p_value is None:
        return "not testable"
    if not attributable:
        return f"p={test.p_value:.2g}"
    if test.significant:
        return f"p={test.p_value:.2g}, a real difference"
    if test.seeds_needed is None:
        return f"p={test.p_value:.2g}, no difference seen"
    needed = seeds_needed(test)
    needed = needed if needed.startswith(">=") else f"~{needed}"
    return f"p={test.p_value:.2g}, not resolved ({needed} seeds per setup would be needed)"


def seeds_by_reason(seeds: Iterable[tuple[int, str]]) -> list[tuple[str, int]]:
    """Seeds grouped by their reason, in order of first appearance: per reason its line ('seed 3: ...',
    'seeds 1, 3: ...') and how many seeds it names."""
    by_reason: dict[str, list[int]] = {}
    for seed, reason in seeds:
        by_reason.setdefault(reason, []).append(seed)
    return [(f"seed{'s' if len(named) > 1 else ''} {', '.join(map(str, named))}: {reason}", len(named))
            for reason, named in by_reason.items()]
