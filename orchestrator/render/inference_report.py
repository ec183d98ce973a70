"""The HTML report of inference runs (`mltrain report` on inference runs): the comparison of setups,
each run's LoadGen result, accuracy, times and verdict, where the time went (--trace), the systems.
Same page frame and escaping as the training report (`orchestrator.render.report`)."""

from __future__ import annotations

from collections.abc import Sequence

from orchestrator import text
from orchestrator.inference.compare import InferenceComparison
from orchestrator.insight import sysinfo
from orchestrator.render.inference import comparison_notes, comparison_rows, latency_text, metric_text
from orchestrator.render.report import _table, esc, page_head
from orchestrator.render.tables import PROFILE_CAVEAT
from orchestrator.results.inference import InferenceRun


def render(runs: Sequence[InferenceRun], result: InferenceComparison, *, title: str) -> str:
    parts = [
        *page_head(title, f"{result.model} {result.scenario}, baseline {result.baseline}; "
                          f"{PROFILE_CAVEAT[result.profile]}"),
        "<h2>Comparison</h2>", comparison_html(result),
        "<ul>" + "".join(f"<li>{esc(note)}</li>" for note in comparison_notes(result)) + "</ul>",
        "<h2>Runs</h2>", runs_html(runs),
        "<h2>Where the time went</h2>", profiles_html(runs),
        "<h2>Systems</h2>",
        *(f"<h3>{esc(r.setup_name)} ({esc(r.run_id)})</h3><pre>"
          + esc("\n".join([*sysinfo.describe_lines(r.system), f"runner: {r.runner}"])) + "</pre>" for r in runs),
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"


def comparison_html(result: InferenceComparison) -> str:
    rows = []
    for row in comparison_rows(result):
        interval = _pair(row["ci_low"], row["ci_high"]) or "-"
        ratio = "baseline" if row["ratio"] is None else text.number(row["ratio"], "x")
        ratio_ci = _pair(row["ratio_low"], row["ratio_high"])
        rows.append([esc(row["setup"]), esc(row["hardware"]), f"{row['valid_runs']}/{row['runs']}",
                     f"{text.number(row['mean'])} {esc(row['unit'])}", interval, ratio, ratio_ci,
                     "-" if row["p_value"] is None else f"{row['p_value']:.2g}"])
    return _table(("setup", "hardware", "LoadGen VALID", "mean", "95% CI", "vs baseline", "95% CI", "Welch p"), rows)


def _pair(low: float | None, high: float | None) -> str:
    return "" if low is None or high is None else f"{text.number(low)}, {text.number(high)}"


def _verdict(valid: bool, reasons: Sequence[str]) -> str:
    return "VALID" if valid else "INVALID: " + "; ".join(reasons)


def runs_html(runs: Sequence[InferenceRun]) -> str:
    rows = []
    for run in runs:
        result = run.result
        perf = result.performance if result else None
        acc = result.accuracy if result else None
        verdict = "no result" if result is None else _verdict(result.valid, result.reasons)
        rows.append([
            esc(run.setup_name), esc(run.run_id), esc(run.profile), esc(metric_text(perf)),
            "-" if perf is None else esc(_verdict(perf.loadgen_valid, perf.loadgen_reasons)),
            "-" if perf is None else esc(latency_text(perf)),
            "-" if acc is None else esc(f"{acc.percent:.3f}% (target {acc.target_percent:.3f}%)"),
            "-" if result is None else text.duration(result.harness.model_load_s * 1000),
            "-" if result is None else text.duration(result.harness.total_inference_s * 1000),
            f'<span class="{"" if result and result.valid else "bad"}">{esc(verdict)}</span>',
        ])
    return _table(("setup", "run", "profile", "metric", "LoadGen", "latency", "accuracy", "model load",
                   "total inference", "as an MLPerf result"), rows)


def profiles_html(runs: Sequence[InferenceRun]) -> str:
    traced = [r for r in runs if r.result and r.result.trace]
    if not traced:
        return '<p class="note">no run was traced (mltrain infer --trace)</p>'
    parts = []
    for run in traced:
        profile = run.result.trace  # type: ignore[union-attr]
        assert profile is not None
        parts.append(f"<h3>{esc(run.run_id)}: {esc(profile.source)}, outside the model "
                     f"{text.percent(profile.outside_model_share)} of the test time</h3>")
        parts.append(_table(("operator", "calls", "time", "share"),
                            [[esc(o.op), str(o.calls), text.duration(o.total_us / 1000), text.percent(o.share)]
                             for o in profile.operators]))
    return "\n".join(parts)
