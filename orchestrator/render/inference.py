"""Inference runs as a person reads them: `mltrain infer` and `mltrain show` lines, and the
comparison of inference setups (`orchestrator.inference.compare`) as tables. Numbers go through
`orchestrator.text`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.table import Table

from orchestrator import text
from orchestrator.inference.compare import InferenceComparison
from orchestrator.insight.statistics import Interval
from orchestrator.render.tables import PROFILE_CAVEAT
from orchestrator.results.inference import InferenceRun, Performance

SHOWN_OPERATORS = 5


def succeeded(run: InferenceRun) -> bool:
    """Exit 0: the run's verdict under its profile (`InferenceRun.passed`, what ``list`` shows)."""
    return run.passed


TESTS_TEXT = {("performance",): "performance only", ("performance", "accuracy"): "performance, then accuracy",
              ("accuracy",): "accuracy only (--accuracy-only)"}


def metric_text(perf: Performance | None) -> str:
    if perf is None or perf.value is None:
        return "-"
    if perf.unit == "ns":
        return f"{text.number(perf.value / 1e6)} ms"
    return f"{text.number(perf.value)} {perf.unit}"


def latency_text(perf: Performance) -> str:
    percentiles = perf.latency.percentiles_ns
    shown = [f"p{p.rstrip('0').rstrip('.')} {text.number(percentiles[p] / 1e6)}" for p in ("50.00", "90.00", "99.00")
             if p in percentiles]
    mean = perf.latency.mean_ns
    return ", ".join([*shown, *([f"mean {text.number(mean / 1e6)}"] if mean is not None else [])]) + " ms"


def result_lines(run: InferenceRun, folder: Path) -> list[str]:
    lines = [f"run {run.run_id}: {run.model} {run.scenario}, profile {run.profile} ({PROFILE_CAVEAT[run.profile]}),"
             f" runner {run.runner}, host {run.host}, state {run.state}"]
    result = run.result
    if result is None:
        return [*lines, f"no result: {run.failure or 'the run did not finish'}"]
    h = result.harness
    versions = ", ".join(f"{k} {v}" for k, v in sorted(h.versions.items()) if k in ("onnxruntime", "torch",
                                                                                    "mlcommons-loadgen"))
    threads = f"{h.threads or 'default'} intra-op thread{'s' * (h.threads != 1)} per call" + (
        f" ({h.threads_source})" if h.threads_source else "")
    workers = (f", {h.workers} worker{'s' * (h.workers != 1)}" + (f" ({h.workers_source})" if h.workers_source else "")
               if h.workers and run.scenario in ("Offline", "Server") else "")
    lines.append(f"backend {h.backend} on {', '.join(h.providers)} ({versions}); batch up to {h.max_batch}, {threads}"
                 f"{workers}")
    lines.append(f"tests: {TESTS_TEXT.get(tuple(run.tests), ', then '.join(run.tests))}")
    perf = result.performance
    if perf is not None:
        verdict = "VALID" if perf.loadgen_valid else "INVALID: " + "; ".join(perf.loadgen_reasons or ("see the log",))
        lines.append(f"{run.scenario}: {perf.metric} {metric_text(perf)} (LoadGen {verdict})")
        lines.append(f"latency: {latency_text(perf)}; {perf.queries} quer{'y' if perf.queries == 1 else 'ies'}")
    acc = result.accuracy
    if acc is not None:
        met = "met" if acc.met else "NOT met"
        lines.append(f"accuracy: {acc.metric} {acc.percent:.3f}% (target {acc.target_percent:.3f}%, {met}): {acc.line}")
    lines.append(f"model load {text.duration(h.model_load_s * 1000)}; total inference"
                 f" {text.duration(h.total_inference_s * 1000)} (loading plus the last test over {h.samples} samples)")
    if h.user_conf:
        lines.append("user.conf: " + ", ".join(f"{k} = {v:g} ({h.user_conf_sources.get(k, 'given')})"
                                               for k, v in sorted(h.user_conf.items())))
    if h.overrides:
        lines.append("beyond the rules: " + ", ".join(f"{k}={v}" for k, v in sorted(h.overrides.items())))
    if result.search is not None:
        trials = "; ".join(f"{t.target_qps:g} {'passed' if t.passed else 'failed'} (LoadGen "
                           f"{'VALID' if t.valid else 'INVALID'})" for t in result.search.trials)
        best = "no trial passed" if result.search.best_qps is None else f"{result.search.best_qps:g} QPS"
        lines.append(f"Server search: {best} (trials: {trials})")
    for test in result.compliance:
        said = [f"{what} {'passed' if passed else 'FAILED'}" for what, passed in
                (("accuracy", test.accuracy_passed), ("performance", test.performance_passed)) if passed is not None]
        lines.append(f"compliance {test.test}: {', '.join(said)} ({folder / test.folder})")
    profile = result.trace
    if profile is not None:
        top = ", ".join(f"{o.op} {text.percent(o.share)}" for o in profile.operators[:SHOWN_OPERATORS])
        lines.append(f"profile ({profile.source}): {top}; outside the model {text.percent(profile.outside_model_share)}"
                     f" of the test time ({profile.file})")
    mlperf = "VALID" if result.valid else "INVALID: " + "; ".join(result.reasons)
    lines.append(f"as an MLPerf result: {mlperf}")
    summary = folder / "performance" / "run_1" if perf is not None else folder / "accuracy"
    lines.append(f"logs: {summary / 'mlperf_log_summary.txt'}")
    return lines


def _scaled(unit: str) -> tuple[float, str]:
    """Latencies are logged in ns and shown in ms."""
    return (1e6, "ms") if unit == "ns" else (1.0, unit)


def comparison_rows(result: InferenceComparison) -> list[dict[str, Any]]:
    """One plain row per setup (the table, --json and --csv)."""
    scale, unit = _scaled(result.unit)

    def shown(value: float | None) -> float | None:
        return None if value is None else value / scale

    rows = []
    for row in result.rows:
        rows.append({
            "setup": row.setup.name, "hardware": row.setup.hardware, "runs": len(row.setup.runs),
            "run_ids": [r.run_id for r in row.setup.runs], "valid_runs": row.valid, "unit": unit,
            "mean": shown(row.mean.value), "ci_low": shown(row.mean.low), "ci_high": shown(row.mean.high),
            "ratio": row.ratio.value if row.ratio else None, "ratio_low": row.ratio.low if row.ratio else None,
            "ratio_high": row.ratio.high if row.ratio else None,
            "p_value": row.test.p_value if row.test else None,
            "harness": row.setup.settings,
        })
    return rows


def comparison_table(result: InferenceComparison) -> Table:
    """One line per setup: runs, the metric's mean with its 95% interval, the ratio to the baseline
    (> 1 better, whichever way the metric points) with its interval, Welch's p."""
    scale, unit = _scaled(result.unit)
    table = Table(title=f"{result.model} {result.scenario}: {result.metric} ({unit}), profile {result.profile}",
                  title_justify="left")
    for column in ("setup", "hardware", "harness", "runs", "LoadGen VALID", "mean", "95% CI", "vs baseline", "95% CI",
                   "Welch p"):
        table.add_column(column)
    for row in result.rows:
        mean = Interval(value=None if row.mean.value is None else row.mean.value / scale,
                        low=None if row.mean.low is None else row.mean.low / scale,
                        high=None if row.mean.high is None else row.mean.high / scale)
        runs = len(row.setup.runs)
        settings = row.setup.settings
        harness = (f"{settings['backend']}, batch {settings['batch']}, threads {settings['threads']}, "
                   f"workers {settings['workers']}")
        table.add_row(row.setup.name, row.setup.hardware, harness, str(runs), f"{row.valid}/{runs}",
                      text.number(mean.value), text.interval(mean).strip(" []") or "-",
                      "baseline" if row.ratio is None else text.number(row.ratio.value, "x"),
                      "" if row.ratio is None else (text.interval(row.ratio).strip(" []") or "-"),
                      text.p_value(row.test))
    return table


def comparison_notes(result: InferenceComparison) -> list[str]:
    better = "higher" if result.higher_is_better else "lower"
    notes = [f"{result.metric}: {better} is better; 'vs baseline' > 1 means better than {result.baseline}"]
    if result.setting_differences:
        notes.append("the harness ran the setups differently, so the ratio measures its settings as much as the "
                     "setups: " + "; ".join(result.setting_differences) + " (give --threads and --max-batch to "
                     "hold them equal)")
    else:
        notes.append("the harness ran every setup alike (backend, batch, threads, workers)")
    if result.profile != "mlperf":
        notes.append(f"profile {result.profile}: {PROFILE_CAVEAT[result.profile]}")
    return notes
