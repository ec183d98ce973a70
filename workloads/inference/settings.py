"""LoadGen's test settings for one model and scenario, the way a submission makes them: the official
``mlperf.conf`` (the copy built into the installed LoadGen, loaded by LoadGen itself) and a
``user.conf`` written from the values the user gave (target QPS, target latency), read by
``TestSettings.FromConfig``; then what the run overrides beyond the rules (``--time``, ``--count``),
kept apart so that the orchestrator can say INVALID where an official minimum is not met.

A retired model runs under one round, declared (its module's ``ROUND``): every value that round's
mlperf.conf gave it (seeds, minimums, percentiles, latency bound, sample counts) replaces what the
installed LoadGen's built-in copy gives, and is what the facts file calls official. (LoadGen 6 reads
only its built-in mlperf.conf, and seeds only from it, so a round's values are set on the settings
directly; a user.conf cannot carry them.)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workloads.inference.errors import HarnessError

SCENARIOS = ("SingleStream", "MultiStream", "Server", "Offline")
OFFICIAL_FIELDS = ("min_duration_ms", "min_query_count", "performance_sample_count_override",
                   "server_target_latency_ns", "server_target_latency_percentile",
                   "single_stream_target_latency_percentile", "multi_stream_target_latency_percentile",
                   "multi_stream_samples_per_query", "qsl_rng_seed", "sample_index_rng_seed", "schedule_rng_seed")
"""What the official mlperf.conf fixes and the facts file records."""
USER_KEYS = {"target_qps": ("Server", "Offline"), "target_latency": ("SingleStream", "MultiStream")}
"""user.conf keys the harness writes from options, and the scenarios each applies to."""


@dataclass(frozen=True, kw_only=True)
class Round:
    """The MLPerf Inference round a model's settings come from, and what its mlperf.conf gave the model."""

    name: str
    source: str
    values: dict[str, dict[str, float]]
    """Per scope ('*' or a scenario), mlperf.conf's keys (without the model) and values, as written there."""

    def for_scenario(self, scenario: str) -> dict[str, float]:
        return {**self.values.get("*", {}), **self.values.get(scenario, {})}


ROUND_KEYS: dict[str, dict[str, tuple[str, float]]] = {
    # mlperf.conf key -> per scenario ('*': every one) the TestSettings field and the factor LoadGen applies
    # (1, never 1.0: an int factor keeps a seed's 64 bits exact)
    "performance_sample_count_override": {"*": ("performance_sample_count_override", 1)},
    "qsl_rng_seed": {"*": ("qsl_rng_seed", 1)},
    "sample_index_rng_seed": {"*": ("sample_index_rng_seed", 1)},
    "schedule_rng_seed": {"*": ("schedule_rng_seed", 1)},
    "min_duration": {"*": ("min_duration_ms", 1)},
    "min_query_count": {"*": ("min_query_count", 1)},
    "samples_per_query": {"MultiStream": ("multi_stream_samples_per_query", 1)},
    "target_latency_percentile": {"SingleStream": ("single_stream_target_latency_percentile", 0.01),
                                  "MultiStream": ("multi_stream_target_latency_percentile", 0.01),
                                  "Server": ("server_target_latency_percentile", 0.01)},
    "target_latency": {"Server": ("server_target_latency_ns", 1e6),
                       "SingleStream": ("single_stream_expected_latency_ns", 1e6),
                       "MultiStream": ("multi_stream_expected_latency_ns", 1e6)},
}
"""How LoadGen's FromConfig maps each key a round's mlperf.conf gives a model."""
EXPECTATIONS = {"single_stream_expected_latency_ns", "multi_stream_expected_latency_ns"}
"""What a user.conf may set instead (an expected latency, not a rule)."""


def apply_round(settings: Any, round_: Round, scenario: str, *, user_set: bool = False) -> dict[str, Any]:
    """Set the round's values for ``scenario`` on ``settings``; what was set. ``user_set``: a user.conf
    gave the expected latency, which the round's then does not replace."""
    applied: dict[str, Any] = {}
    for key, value in round_.for_scenario(scenario).items():
        mapping = ROUND_KEYS.get(key)
        if mapping is None:
            raise HarnessError(f"round {round_.name}: {key} is not a setting this harness knows how to apply")
        target = mapping.get(scenario) or mapping.get("*")
        if target is None:
            continue  # a key of another scenario (Offline has no latency percentile)
        name, factor = target
        if name in EXPECTATIONS and user_set:
            continue
        current = getattr(settings, name)
        converted = type(current)(value * factor)  # factor 1 is an int: a 64-bit seed stays exact
        setattr(settings, name, converted)
        applied[name] = converted
    return applied


@dataclass(frozen=True, kw_only=True)
class Requested:
    """What the run asks of LoadGen beyond mlperf.conf."""

    conf_model: str
    """The model's key in mlperf.conf (resnet50, retinanet, ...)."""
    scenario: str
    user_conf: dict[str, float] = field(default_factory=dict)
    """user.conf keys (without the model and scenario) and values."""
    time_s: float | None = None
    """--time: min and max duration (as the reference's --time), beyond the rules."""
    count: int | None = None
    """--count: min and max query count (as the reference's --count), beyond the rules."""
    min_query_count: int | None = None
    """--min-query-count: LoadGen's min_query_count (samples in Offline), beyond the rules."""
    conf_round: Round | None = None
    """The model's round, whose mlperf.conf values replace the built-in copy's; None: the built-in copy."""

    def __post_init__(self) -> None:
        if self.scenario not in SCENARIOS:
            raise HarnessError(f"unknown scenario {self.scenario!r}: one of {', '.join(SCENARIOS)}")


def user_conf_text(requested: Requested) -> str:
    lines = ["# written by workloads.inference from the run's options (recorded in harness.json)"]
    for key, value in sorted(requested.user_conf.items()):
        lines.append(f"{requested.conf_model}.{requested.scenario}.{key} = {value:g}")
    return "\n".join(lines) + "\n"


def official(lg: Any, conf_model: str, scenario: str, round_: Round | None = None) -> dict[str, Any]:
    """The values the rules give this model and scenario: the built-in mlperf.conf (LoadGen's own
    reading), with a retired model's round's values over it."""
    settings = lg.TestSettings()
    settings.FromConfig("", conf_model, scenario, 0)
    if round_ is not None:
        apply_round(settings, round_, scenario)
    return {name: getattr(settings, name) for name in OFFICIAL_FIELDS}


def build(lg: Any, requested: Requested, user_conf: Path) -> tuple[Any, dict[str, Any]]:
    """(TestSettings, the overrides beyond user.conf). Writes ``user_conf`` first: LoadGen reads it
    (and mlperf.conf before it) in ``FromConfig``, once per process as the rules want; a retired
    model's round is applied after it."""
    user_conf.write_text(user_conf_text(requested))
    settings = lg.TestSettings()
    if settings.FromConfig(str(user_conf), requested.conf_model, requested.scenario) != 0:
        raise HarnessError(f"{user_conf}: LoadGen refused it")
    settings.scenario = getattr(lg.TestScenario, requested.scenario)
    if requested.conf_round is not None:
        apply_round(settings, requested.conf_round, requested.scenario,
                    user_set="target_latency" in requested.user_conf)
    overrides: dict[str, Any] = {}
    if requested.time_s is not None:
        overrides["min_duration_ms"] = overrides["max_duration_ms"] = int(requested.time_s * 1000)
    if requested.count is not None:
        overrides["min_query_count"] = overrides["max_query_count"] = requested.count
    if requested.min_query_count is not None:
        overrides["min_query_count"] = requested.min_query_count
    for name, value in overrides.items():
        setattr(settings, name, value)
    return settings, overrides


LOADGEN_BYTES_PER_SAMPLE = 400
"""What LoadGen holds per sample it schedules before a test starts (its queries, the samples handed
to the SUT): 200 B in Offline and 300 B in Server measured with LoadGen 6.0, the rest margin."""
MEMORY_SHARE = 0.5
"""Of the memory available when a test starts, what LoadGen's schedule, or one batch, may take."""
MAX_TEST_S = 7 * 86_400
"""The longest test the harness starts: LoadGen's schedule is in nanoseconds, and a test planned to
run past a week is a target given in the wrong unit."""
OFFLINE_SLACK = 1.1
"""LoadGen's Offline query holds this much more than target QPS x duration (its ``kSlack``)."""


@dataclass(frozen=True, kw_only=True)
class Schedule:
    """What LoadGen will make of a performance test's settings before it starts."""

    scenario: str
    qps: float
    """Queries per second LoadGen plans for (from the target QPS, or the target latency)."""
    queries: int
    samples: int
    """Samples LoadGen generates (and holds in memory) for the test."""
    per_query: int
    """Samples in each query (MultiStream's 8; one elsewhere, Offline counting samples as queries)."""
    planned_s: float
    """How long the schedule runs at that rate (Offline: its duration)."""
    min_s: float

    @property
    def memory_bytes(self) -> int:
        return self.samples * LOADGEN_BYTES_PER_SAMPLE


def schedule(settings: Any, scenario: str) -> Schedule:
    """The queries and samples LoadGen generates for ``settings`` (its TestSettings, as built), the way
    LoadGen sizes them: queries at the target rate until both min_duration and min_query_count are
    met, capped by max_query_count; Offline's one query holding 1.1 x target QPS x min_duration samples."""
    min_s = settings.min_duration_ms / 1000
    if scenario == "SingleStream":
        qps = 1e9 / settings.single_stream_expected_latency_ns
    elif scenario == "MultiStream":
        qps = 1e9 / settings.multi_stream_expected_latency_ns
    elif scenario == "Server":
        qps = settings.server_target_qps
    else:
        qps = settings.offline_expected_qps
    if not (math.isfinite(qps) and qps > 0):
        raise HarnessError(f"LoadGen's target of {qps:g} queries/s for {scenario}: give a positive, finite target")
    per_query = settings.multi_stream_samples_per_query if scenario == "MultiStream" else 1
    if scenario == "Offline":
        samples = max(settings.min_query_count, int(OFFLINE_SLACK * min_s * qps))  # LoadGen's uint64 cast
        return Schedule(scenario=scenario, qps=qps, queries=1, samples=samples, per_query=1, planned_s=min_s,
                        min_s=min_s)
    queries = max(settings.min_query_count, math.ceil(min_s * qps))
    if settings.max_query_count:
        queries = min(queries, settings.max_query_count)
    planned_s = queries / qps
    if settings.max_duration_ms:  # LoadGen issues nothing after it, once its first query is out
        planned_s = min(planned_s, max(settings.max_duration_ms / 1000, 1 / qps))
    return Schedule(scenario=scenario, qps=qps, queries=queries, samples=queries * per_query, per_query=per_query,
                    planned_s=planned_s, min_s=min_s)


def fits(plan: Schedule, available_bytes: int | None) -> bool:
    """LoadGen's schedule fits this machine: its memory within ``MEMORY_SHARE`` of what is available,
    its time within a week."""
    if plan.planned_s > MAX_TEST_S:
        return False
    return available_bytes is None or plan.memory_bytes <= MEMORY_SHARE * available_bytes


def highest_qps(plan: Schedule, available_bytes: int | None) -> float:
    """The highest rate whose schedule `fits` (the same settings otherwise)."""
    if available_bytes is None:
        return plan.qps
    samples = MEMORY_SHARE * available_bytes / LOADGEN_BYTES_PER_SAMPLE
    seconds = OFFLINE_SLACK * plan.min_s if plan.scenario == "Offline" else plan.min_s
    return samples / plan.per_query / max(seconds, 1e-3)


LOWEST_QPS = 0.001
"""The lowest target rate taken (one query every 1,000 s), as the orchestrator bounds it."""


def lowest_qps(plan: Schedule) -> float:
    """The lowest rate whose schedule ends within `MAX_TEST_S`."""
    return max(LOWEST_QPS, plan.queries / MAX_TEST_S if plan.scenario != "Offline" else 0.0)
