"""LoadGen's targets and schedule for one test: user.conf's target QPS and latency (given, or auto: a
share of what the warm-up measured), LoadGen's settings fitted to what this machine can hold, and
what the test is expected to take (a test that will run long, or stop short of LoadGen's minimum).
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Any

from workloads.common.memory import available_bytes
from workloads.inference import settings as lg_settings
from workloads.inference.errors import HarnessError
from workloads.inference.options import Options
from workloads.inference.sut import INLINE_SCENARIOS

AUTO = "auto"
AUTO_SHARE = {"Server": 0.5, "Offline": 1.25}
"""Of the warm-up's sustained throughput, the auto target QPS: Offline's query must last the whole
test should the test run faster than the warm-up (on a shared 2-CPU machine, up to 20% faster; LoadGen's
own slack is 10%), so the test runs about 1.4 x its duration; Server at half the rate keeps its
latencies bounded."""
AUTO_LATENCY_SHARE = 0.5
"""Of the warm-up's latency, the auto target latency: LoadGen plans twice the queries a test needs,
so that a faster test still reaches its minimum duration."""
RUNS_LONG = 2.0
"""A test expected to run this many times its duration, or longer, is said to before it starts (an
auto Offline target plans 1.4 x)."""


def _number(text: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise HarnessError(f"{what} {text!r}: give a positive number or auto") from None
    if not (math.isfinite(value) and value > 0):
        raise HarnessError(f"{what} {text!r}: give a positive number or auto")
    return value


def auto_targets(options: Options) -> list[str]:
    """The user.conf targets of this scenario that the warm-up measures."""
    given = {"target_qps": options.target_qps, "target_latency": options.target_latency_ms}
    return [key for key, text in given.items() if text == AUTO and options.scenario in lg_settings.USER_KEYS[key]]


def user_values(options: Options, module: Any,
                measured: dict[str, float] | None) -> tuple[dict[str, float], dict[str, str]]:
    """user.conf values and, per value, where it came from (``measured``: the warm-up, for auto)."""
    values: dict[str, float] = {}
    sources: dict[str, str] = {}
    given = {"target_qps": options.target_qps, "target_latency": options.target_latency_ms}
    for key, text in given.items():
        if text is None or options.scenario not in lg_settings.USER_KEYS[key]:
            continue
        if text == AUTO:
            if measured is None:
                raise HarnessError(f"{key} auto needs the warm-up's timings")
            # LoadGen generates the queries of a test from these: too high a QPS (Offline) or too low a
            # latency only makes the test run past its duration; the other way round it ends too soon.
            if key == "target_qps":
                share = AUTO_SHARE.get(options.scenario, 1.0)
                values[key] = round(measured["throughput_qps"] * share, 3)
                sources[key] = f"auto: {share:g} x the warm-up's sustained throughput"
            else:
                batch = "batch_ms" if options.scenario == "MultiStream" else "latency_ms"
                values[key] = round(measured[batch] * AUTO_LATENCY_SHARE, 3)
                sources[key] = f"auto: {AUTO_LATENCY_SHARE:g} x the warm-up latency"
        else:
            values[key], sources[key] = _number(text, f"--{key.replace('_', '-')}"), "given"
    return values, sources


def fitted(lg: Any, requested: lg_settings.Requested, sources: dict[str, str], user_conf: Path,
           ) -> tuple[Any, dict[str, Any], lg_settings.Schedule, dict[str, float]]:
    """LoadGen's settings, their overrides and schedule, the schedule within what this machine can
    hold (`settings.fits`): an auto target lowered to fit, and said so; a given one refused (exit 2)."""
    built, overrides = lg_settings.build(lg, requested, user_conf)
    plan = lg_settings.schedule(built, requested.scenario)
    available = available_bytes()
    if lg_settings.fits(plan, available):
        return built, overrides, plan, requested.user_conf
    key = "target_qps" if requested.scenario in lg_settings.USER_KEYS["target_qps"] else "target_latency"
    high, low = lg_settings.highest_qps(plan, available), lg_settings.lowest_qps(plan)
    if sources.get(key, "").startswith(AUTO) and plan.qps > high:
        value = high if key == "target_qps" else 1000 / high
        sources[key] += f", lowered to what LoadGen's schedule may take of this machine's memory ({value:.4g})"
        requested = replace(requested, user_conf={**requested.user_conf, key: round(value, 3)})
        built, overrides = lg_settings.build(lg, requested, user_conf)
        return built, overrides, lg_settings.schedule(built, requested.scenario), requested.user_conf
    if plan.planned_s > lg_settings.MAX_TEST_S:
        what = f"plan a test of {plan.planned_s:.3g} s, longer than {lg_settings.MAX_TEST_S // 86_400} days"
    else:
        what = (f"hold {plan.samples:,} samples, {plan.memory_bytes / 2**30:,.4g} GiB, where "
                f"{(available or 0) / 2**30:,.4g} GiB are available")
    if key == "target_qps":
        range_ = f"give --target-qps from {low:.4g} to {high:.4g}"
    else:
        range_ = f"give --target-latency-ms from {1000 / high:.4g} to {1000 / max(low, 1e-12):.4g}"
    raise HarnessError(f"{requested.scenario} at {plan.qps:.4g} queries/s over {plan.min_s:g} s: LoadGen would "
                       f"{what}; {range_}")


def expected_seconds(plan: lg_settings.Schedule, measured: dict[str, float], scenario: str) -> float:
    """How long the performance test should run at the warm-up's pace."""
    rate = measured["throughput_qps"]
    if scenario == "Offline":
        return plan.samples / rate
    if scenario == "Server":  # the queries it issues must be answered too
        return max(plan.planned_s, min(plan.samples, plan.qps * plan.planned_s) / rate)
    latency_s = measured["batch_ms" if scenario == "MultiStream" else "latency_ms"] / 1000
    return max(plan.min_s, plan.queries * latency_s)


def cut_short(settings: Any, measured: dict[str, float], scenario: str) -> str | None:
    """Why a one-query-at-a-time test (SingleStream, MultiStream) will stop at its time limit before
    LoadGen's minimum of queries, at the warm-up's latency (then INVALID: "min queries not met"); None
    when it will not."""
    if scenario not in INLINE_SCENARIOS or not settings.max_duration_ms:
        return None
    latency_s = measured["batch_ms" if scenario == "MultiStream" else "latency_ms"] / 1000
    limit_s, least = settings.max_duration_ms / 1000, int(settings.min_query_count)
    if latency_s <= 0 or limit_s / latency_s >= least:
        return None
    return (f"the {scenario} test stops at its {limit_s:g} s limit after about {limit_s / latency_s:,.0f} of the "
            f"{least:,} queries LoadGen requires ({latency_s * 1000:.4g} ms each in the warm-up): its result will "
            f"be INVALID (min queries not met); --time {math.ceil(1.2 * least * latency_s)} lets it finish")
