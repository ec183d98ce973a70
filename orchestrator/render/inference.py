"""Inference runs as a person reads them: `mltrain infer` and `mltrain show` lines, and the
comparison of inference setups (`orchestrator.inference.compare`) as tables. Numbers go through
`orchestrator.render.text`."""

from __future__ import annotations

from pathlib import Path

from rich.table import Table

from orchestrator.render import text
from orchestrator.render.tables import PROFILE_CAVEAT
from orchestrator.results.inference import InferenceRun, Performance

SHOWN_OPERATORS = 5


def succeeded(run: InferenceRun) -> bool:
    """Exit 0: the MLPerf verdict under the mlperf profile; elsewhere LoadGen's verdict on the settings
    the profile asked for and the accuracy target (the official gaps are said, not failed on)."""
    result = run.result
    if result is None or result.performance is None:
        return False
    if run.profile == "mlperf":
        return result.valid
    return result.performance.loadgen_valid and (result.accuracy is None or result.accuracy.met)


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
    lines.append(f"backend {h.backend} on {', '.join(h.providers)} ({versions}); batch up to {h.max_batch}")
    perf = result.performance
    if perf is not None:
        verdict = "VALID" if perf.loadgen_valid else "INVALID: " + "; ".join(perf.loadgen_reasons or ("see the log",))
        lines.append(f"{run.scenario}: {perf.metric} {metric_text(perf)} (LoadGen {verdict})")
        lines.append(f"latency: {latency_text(perf)}; {perf.queries} queries")
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
        trials = "; ".join(f"{t.target_qps:g} {'VALID' if t.valid else 'INVALID'}" for t in result.search.trials)
        best = "none valid" if result.search.best_qps is None else f"{result.search.best_qps:g} QPS"
        lines.append(f"Server search: {best} (trials: {trials})")
    profile = result.profile
    if profile is not None:
        top = ", ".join(f"{o.op} {text.percent(o.share)}" for o in profile.operators[:SHOWN_OPERATORS])
        lines.append(f"profile ({profile.source}): {top}; outside the model {text.percent(profile.outside_model_share)}"
                     f" of the test time ({profile.file})")
    mlperf = "VALID" if result.valid else "INVALID: " + "; ".join(result.reasons)
    lines.append(f"as an MLPerf result: {mlperf}")
    lines.append(f"logs: {folder / 'performance' / 'run_1' / 'mlperf_log_summary.txt'}")
    return lines


def comparison_table(rows: list[dict[str, object]], unit: str) -> Table:
    """One line per setup: runs, the metric's mean with its 95% interval, the ratio to the baseline."""
    table = Table(title=f"inference comparison ({unit})", title_justify="left")
    for column in ("setup", "hardware", "runs", "mean", "95% CI", "vs baseline", "95% CI", "Welch p", "valid"):
        table.add_column(column)
    for row in rows:
        table.add_row(*(str(row[c]) for c in ("setup", "hardware", "runs", "mean", "ci", "ratio", "ratio_ci", "p",
                                              "valid")))
    return table
