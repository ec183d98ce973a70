"""Tables and lines that show runs and scores to a person (rich renderables, no I/O)."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from orchestrator.mlperf.scoring import Score
from orchestrator.output import Output
from orchestrator.session.seed import SeedProgress

PROFILE_CAVEAT = {
    "mlperf": "MLPerf rules, unofficial until submitted and reviewed",
    "qualify": "qualify profile: not an MLPerf result",
    "smoke": "smoke profile: synthetic data and a scaled-down model, comparable with nothing",
}


def seconds(ms: float | None) -> str:
    return "-" if ms is None else f"{ms / 1000:.1f}"


def progress_table(title: str, rows: dict[int, SeedProgress]) -> Table:
    table = Table(title=title, title_justify="left")
    for column in ("seed", "state", "elapsed s", "epoch", "accuracy", "result"):
        table.add_column(column, justify="right" if column != "state" and column != "result" else "left")
    for seed, p in rows.items():
        elapsed = p.elapsed()
        table.add_row(
            str(seed), p.state, "-" if elapsed is None else f"{elapsed:.1f}",
            "-" if p.epoch is None else f"{p.epoch:g}", "-" if p.accuracy is None else f"{p.accuracy:.4f}",
            p.status,
        )
    return table


def seeds_table(score: Score) -> Table:
    table = Table(title="Runs", title_justify="left")
    for column in ("seed", "status", "time-to-train s", "epochs", "counted", "why not"):
        table.add_column(column, justify="right" if column in ("seed", "time-to-train s", "epochs") else "left")
    for seed, row in score.per_seed.items():
        counted = "yes" if row["counted"] else ("dropped" if row["status"] == "converged" else "no")
        epochs = row["epochs_to_target"]
        table.add_row(
            str(seed), row["status"], seconds(row["time_to_train_ms"]), "-" if epochs is None else f"{epochs:g}",
            counted, "" if row["status"] == "converged" else row["reason"],
        )
    return table


def show_score(out: Output, summary: dict[str, Any], score: Score, *, as_json: bool) -> None:
    """A scored run as commands print it: the summary as JSON, or the per-seed table and score lines."""
    if as_json:
        out.json(summary)
        return
    out.table(seeds_table(score))
    out.lines(score_lines(summary, score))


def score_lines(summary: dict[str, Any], score: Score) -> list[str]:
    profile = summary["profile"]
    ttt = score.time_to_train_ms
    lines = [
        f"{summary['workload']} ({PROFILE_CAVEAT.get(profile, profile)}), run {summary['run_id']}",
        f"runs {score.runs}, converged {score.converged}, non-converged {score.non_converged}"
        + (f", unfinished {score.unfinished}" if score.unfinished else ""),
    ]
    if score.score_ms is not None:
        kept = len(score.counted_seeds)
        lines.append(
            f"time-to-train (olympic mean of {kept}): {score.score_ms / 1000:.2f} s = {score.score_ms / 60000:.3f} min"
        )
    if ttt.n:
        ci = f"95% CI {seconds(ttt.ci95_low)}-{seconds(ttt.ci95_high)} s" if ttt.ci95_low is not None else "CI n/a"
        cv = f"CV {ttt.cv:.1%}" if ttt.cv is not None else "CV n/a"
        lines.append(
            f"converged runs: mean {seconds(ttt.mean)} s, std {seconds(ttt.std)} s, {cv}, {ci},"
            f" min {seconds(ttt.minimum)} s, max {seconds(ttt.maximum)} s"
        )
    mlcommons = summary.get("mlcommons")
    if mlcommons:
        theirs = mlcommons.get("summarizer_score_min")
        verdict = "agrees" if mlcommons.get("agrees") else "DISAGREES"
        shown = "no score" if theirs is None else f"{theirs:.4f} min"
        lines.append(f"mlperf_logging result_summarizer on {mlcommons['folder']}: {shown} ({verdict})")
    lines.append("result: VALID" if score.valid else f"result: INVALID: {score.reason}")
    return lines
