"""LoadGen's test settings for one model and scenario, the way a submission makes them: the official
``mlperf.conf`` (the copy built into the installed LoadGen, loaded by LoadGen itself) and a
``user.conf`` written from the values the user gave (target QPS, target latency, and the settings
of a retired model), read by ``TestSettings.FromConfig``; then what the run overrides beyond the
rules (``--time``, ``--count``), kept apart so that the orchestrator can say INVALID where an
official minimum is not met.
"""

from __future__ import annotations

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

    def __post_init__(self) -> None:
        if self.scenario not in SCENARIOS:
            raise HarnessError(f"unknown scenario {self.scenario!r}: one of {', '.join(SCENARIOS)}")


def user_conf_text(requested: Requested) -> str:
    lines = ["# written by workloads.inference from the run's options (recorded in harness.json)"]
    for key, value in sorted(requested.user_conf.items()):
        lines.append(f"{requested.conf_model}.{requested.scenario}.{key} = {value:g}")
    return "\n".join(lines) + "\n"


def official(lg: Any, conf_model: str, scenario: str) -> dict[str, Any]:
    """The values the built-in mlperf.conf gives this model and scenario (LoadGen's own reading)."""
    settings = lg.TestSettings()
    settings.FromConfig("", conf_model, scenario, 0)
    return {name: getattr(settings, name) for name in OFFICIAL_FIELDS}


def build(lg: Any, requested: Requested, user_conf: Path) -> tuple[Any, dict[str, Any]]:
    """(TestSettings, the overrides beyond user.conf). Writes ``user_conf`` first: LoadGen reads it
    (and mlperf.conf before it) in ``FromConfig``, once per process as the rules want."""
    user_conf.write_text(user_conf_text(requested))
    settings = lg.TestSettings()
    if settings.FromConfig(str(user_conf), requested.conf_model, requested.scenario) != 0:
        raise HarnessError(f"{user_conf}: LoadGen refused it")
    settings.scenario = getattr(lg.TestScenario, requested.scenario)
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
