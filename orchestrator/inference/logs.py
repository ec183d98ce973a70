"""LoadGen's logs, the accuracy script's line and the harness's facts file, read into typed records.

The orchestrator trusts only these files: ``mlperf_log_detail.txt`` (MLLOG lines, read by the one
MLLOG reader), ``accuracy.txt`` and ``harness.json``. A file that is missing or foreign is a
`LogError` naming it. What mlperf.conf and the rules fix is checked here against what LoadGen says
it ran with (its ``effective_*`` settings): a short test is INVALID as an MLPerf result, and says why.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from orchestrator.config.files import first_problem
from orchestrator.config.reading import SMALL_BYTES, read_json
from orchestrator.errors import LogError
from orchestrator.inference.declaration import ModelFacts
from orchestrator.mlperf import mllog
from orchestrator.results.inference import Accuracy, Harness, Latency, OperatorProfile, OperatorShare, Performance

DETAIL = "mlperf_log_detail.txt"
ACCURACY_LOG = "mlperf_log_accuracy.json"
FACTS = "harness.json"
FACTS_SCHEMA = 1
METRICS = {  # scenario -> (detail key, metric name, unit, higher is better)
    "Offline": ("result_samples_per_second", "samples per second", "samples/s", True),
    "Server": ("result_completed_samples_per_sec", "completed samples per second", "samples/s", True),
    "SingleStream": ("result_90.00_percentile_latency_ns", "90th percentile latency", "ns", False),
    "MultiStream": ("result_99.00_percentile_per_query_latency_ns", "99th percentile latency per query", "ns", False),
}
CONDITIONS = {  # LoadGen's yes/no keys and what a 'no' means
    "result_min_duration_met": "min duration not met",
    "result_min_queries_met": "min queries not met",
    "early_stopping_met": "early stopping not met",
    "result_perf_constraints_met": "performance constraints (the latency bound) not met",
}
_PERCENTILE = re.compile(r"^result_(\d+\.\d+)_percentile_(?:per_query_)?latency_ns$")
_ACCURACY = re.compile(r"(?:accuracy|mAP)=(-?[0-9.]+)%")
_DICE = re.compile(r"Accuracy:\s*mean\s*=\s*([0-9.]+)")
"""The 3D-UNet reference's line ('Accuracy: mean = 0.86170, kidney = 0.9347, tumor = 0.7887'): a fraction."""


def _number(value: Any) -> float | None:
    return float(value) if mllog.is_number(value) else None


def read_facts(results: Path) -> dict[str, Any]:
    path = results / FACTS
    try:
        facts = read_json(path, max_bytes=SMALL_BYTES)
    except FileNotFoundError:
        raise LogError(f"{path}: missing: the harness wrote no facts file (see its output.log)") from None
    except (OSError, ValueError) as exc:
        raise LogError(f"{path}: unreadable ({' '.join(str(exc).split())})") from None
    if not isinstance(facts, dict) or facts.get("schema") != FACTS_SCHEMA:
        raise LogError(f"{path}: not a harness facts file of schema {FACTS_SCHEMA}")
    return facts


def harness_record(facts: dict[str, Any], where: Path) -> Harness:
    fields = {name: facts.get(name) for name in ("backend", "device", "providers", "versions", "model_sha256",
                                                   "model_load_s", "total_inference_s", "preprocess_s", "max_batch",
                                                   "threads", "threads_source", "workers", "workers_source",
                                                   "samples", "user_conf", "user_conf_sources", "overrides",
                                                   "official")}
    try:
        return Harness.model_validate({k: v for k, v in fields.items() if v is not None})
    except ValidationError as exc:
        raise LogError(f"{where / FACTS}: {first_problem(exc)}") from None


def _detail_events(path: Path) -> list[mllog.Event]:
    """The MLLOG events of a LoadGen detail log; OSError where it cannot be read."""
    return mllog.parse_lines(path.read_text(errors="replace").splitlines()).events


def _first_values(events: list[mllog.Event]) -> dict[str, Any]:
    """Each key's first value."""
    values: dict[str, Any] = {}
    for event in events:
        values.setdefault(event.key, event.value)
    return values


def detail_values(path: Path) -> dict[str, Any]:
    """Each key's first value in a LoadGen detail log (``mlperf_log_detail.txt``); OSError where it
    cannot be read (each caller says so in its own words)."""
    return _first_values(_detail_events(path))


def performance(folder: Path, scenario: str) -> Performance:
    """The test's verdict, metric and latencies from its ``mlperf_log_detail.txt``."""
    path = folder / DETAIL
    try:
        events = _detail_events(path)
    except OSError as exc:
        raise LogError(f"{path}: {exc.strerror or exc} (LoadGen wrote no detail log: see the job's output.log)") \
            from None
    values = _first_values(events)
    errors = [f"{event.key}: {event.value}" for event in events
              if event.key.startswith("error_") or event.metadata.get("is_error")]
    validity = values.get("result_validity")
    if validity not in ("VALID", "INVALID"):
        raise LogError(f"{path}: no result_validity: LoadGen did not finish the test")
    logged = values.get("effective_scenario")
    if logged is not None and str(logged) != scenario:
        raise LogError(f"{path}: LoadGen ran scenario {logged}, not {scenario}")
    key, metric, unit, higher = METRICS[scenario]
    reasons = [why for key_, why in CONDITIONS.items() if values.get(key_) is False]
    recommendation = str(values.get("result_invalid_reason") or "").strip()
    if validity == "INVALID" and recommendation:
        reasons.append(recommendation)
    percentiles = {m.group(1): float(v) for k, v in values.items()
                   if (m := _PERCENTILE.match(k)) and _number(v) is not None}
    return Performance(
        scenario=scenario, metric=metric, value=_number(values.get(key)), unit=unit, higher_is_better=higher,
        loadgen_valid=validity == "VALID", loadgen_reasons=tuple(reasons), errors=tuple(errors),
        latency_bound_met=values.get("result_perf_constraints_met") if isinstance(
            values.get("result_perf_constraints_met"), bool) else None,
        latency=Latency(min_ns=_number(values.get("result_min_latency_ns")),
                        mean_ns=_number(values.get("result_mean_latency_ns")),
                        max_ns=_number(values.get("result_max_latency_ns")), percentiles_ns=percentiles),
        queries=int(values["result_query_count"]) if _number(values.get("result_query_count")) is not None else None,
        samples_per_second=_number(values.get("result_samples_per_second")
                                   or values.get("result_completed_samples_per_sec")),
        effective={k[len("effective_"):]: v for k, v in values.items() if k.startswith("effective_")},
    )


def line_percent(line: str) -> float | None:
    """The accuracy an accuracy script's line says, in percent (as printed: its rounding); None without one."""
    found, dice = _ACCURACY.search(line), _DICE.search(line)
    if found is not None:
        return float(found.group(1))
    return 100.0 * float(dice.group(1)) if dice is not None else None


def accuracy(folder: Path, facts: ModelFacts, target_percent: float | None = None,
             harness_facts: dict[str, Any] | None = None) -> Accuracy:
    """The accuracy script's number (``accuracy.txt``) against the model's target (or ``target_percent``).
    The samples scored: the line's ``total=`` where the script prints one (top-1), else what the harness
    counted in LoadGen's accuracy log (``harness.json``: the mAP and Dice scripts print no count)."""
    path = folder / "accuracy.txt"
    try:
        line = next((text.strip() for text in path.read_text().splitlines() if text.strip()), "")
    except OSError as exc:
        raise LogError(f"{path}: {exc.strerror or exc} (the accuracy script's result is missing)") from None
    percent = line_percent(line)
    if percent is None:
        raise LogError(f"{path}: no 'accuracy=x%', 'mAP=x%' or 'Accuracy: mean = x' in {line[:80]!r}")
    total = re.search(r"total=(\d+)", line)
    counted = ((harness_facts or {}).get("accuracy") or {}).get("samples")
    samples = int(total.group(1)) if total else int(counted) if isinstance(counted, int) else 0
    target = facts.accuracy.target if target_percent is None else target_percent
    return Accuracy(metric=facts.accuracy.metric, percent=percent, target_percent=target, met=percent >= target,
                    samples=samples, line=line)


def official_gaps(perf: Performance | None, harness: Harness, facts: ModelFacts, acc: Accuracy | None,
                  applied_round: str | None = None) -> list[str]:
    """Where the run fell short of what mlperf.conf (LoadGen's built-in copy, or the retired model's round's,
    as the harness recorded it) and the rules fix. ``applied_round``: the round the harness says it applied."""
    gaps: list[str] = []
    official = harness.official
    conf = f"{facts.round}'s mlperf.conf" if facts.round else "mlperf.conf"
    if (applied_round or "current") != (facts.round or "current"):
        gaps.append(f"the harness applied the settings of round {applied_round or 'current'}, the model's declaration "
                    f"names {facts.round or 'the current one'}")
    if perf is not None:
        effective = perf.effective
        queries = "min_sample_count" if perf.scenario == "Offline" else "min_query_count"  # Offline: one query
        for name, official_name in (("min_duration_ms", "min_duration_ms"), (queries, "min_query_count"),
                                    ("performance_sample_count", "performance_sample_count_override")):
            have, want = _number(effective.get(name)), _number(official.get(official_name))
            if have is not None and want and have < want:
                gaps.append(f"{name} {have:g} < {want:g} ({conf})")
        if _number(effective.get("max_duration_ms")) and _number(official.get("min_duration_ms")) \
                and effective["max_duration_ms"] < official["min_duration_ms"]:
            gaps.append(f"max_duration_ms {effective['max_duration_ms']:g} cuts the test short")
        for seed in ("qsl_rng_seed", "sample_index_rng_seed", "schedule_rng_seed"):
            if seed in effective and seed in official and int(effective[seed]) != int(official[seed]):
                gaps.append(f"{seed} is not {conf}'s")
        if perf.scenario == "Server" and _number(official.get("server_target_latency_ns")) \
                and _number(effective.get("target_latency_ns")) \
                and not math.isclose(effective["target_latency_ns"], official["server_target_latency_ns"]):
            gaps.append(f"target_latency_ns {effective['target_latency_ns']:g} is not {conf}'s "
                        f"{official['server_target_latency_ns']:g}")
    if acc is None:
        gaps.append("no accuracy run")
    elif acc.samples < facts.dataset.samples:
        gaps.append(f"accuracy over {acc.samples} samples, not the {facts.dataset.samples} of {facts.dataset.name}")
    return gaps


def trace_summary(facts: dict[str, Any]) -> OperatorProfile | None:
    trace = facts.get("trace")
    if not isinstance(trace, dict):
        return None
    tests = facts.get("tests") or {}
    test_s = sum(float(t.get("test_s", 0.0)) for t in tests.values())
    predict_s = sum(float(t.get("predict_s", 0.0)) for t in tests.values())
    total_us = float(trace.get("operator_us") or 0.0)
    operators = tuple(OperatorShare(op=str(o["op"]), calls=int(o["calls"]), total_us=float(o["total_us"]),
                                    share=float(o["total_us"]) / total_us if total_us else 0.0)
                      for o in trace.get("operators", []))
    inline = facts.get("scenario") in ("SingleStream", "MultiStream")  # answered in LoadGen's thread
    busy = test_s * (1 if inline else max(int(facts.get("workers") or 1), 1))
    return OperatorProfile(source=str(trace.get("source")), file=str(trace.get("file")), operators=operators,
                   operator_s=total_us / 1e6, predict_s=predict_s, test_s=test_s,
                   outside_model_share=max(0.0, 1.0 - total_us / 1e6 / busy) if busy else None)
