"""Tables and lines that show runs and scores to a person (rich renderables; `show_score` is the
one function here that writes, through the `Output` it is given)."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from orchestrator.output import Output
from orchestrator.render.text import seconds
from orchestrator.results.records import RunStatus, Score, Summary
from orchestrator.results.store import StoredRun
from orchestrator.session.seed import SeedProgress

PROFILE_CAVEAT = {
    "mlperf": "MLPerf rules, unofficial until submitted and reviewed",
    "qualify": "qualify profile: not an MLPerf result",
    "smoke": "smoke profile: synthetic data and a scaled-down model, comparable with nothing",
}


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


def runs_table(rows: list[dict[str, Any]]) -> Table:
    """`mltrain list`: one line per run from the index."""
    table = Table(title=f"{len(rows)} runs", title_justify="left")
    table.add_column("run id", no_wrap=True, overflow="fold")
    for column in ("workload", "profile", "label", "runner", "seeds", "converged", "score s", "valid", "state"):
        table.add_column(column)
    for r in rows:
        valid = "-" if r["valid"] is None else ("yes" if r["valid"] else "no")
        table.add_row(
            r["run_id"], r["workload"] or "", r["profile"] or "", r["label"] or "", r["runner"] or "",
            str(r["seeds"]), "-" if r["converged"] is None else str(r["converged"]), seconds(r["score_ms"]), valid,
            r["state"] or "",
        )
    return table


def run_lines(run: StoredRun) -> list[str]:
    """`mltrain show`: what the run was, before its score."""
    m = run.manifest
    return [
        f"run {run.run_id}: {m.workload} profile {m.profile} runner {m.runner} host {m.host} state {m.state}",
        f"started {m.started_at} ended {m.ended_at} folder {run.paths.root}",
    ]


def seeds_table(score: Score) -> Table:
    table = Table(title="Runs", title_justify="left")
    for column in ("seed", "status", "time-to-train s", "epochs", "counted", "why not"):
        table.add_column(column, justify="right" if column in ("seed", "time-to-train s", "epochs") else "left")
    for seed, row in score.per_seed.items():
        converged = row.status is RunStatus.CONVERGED
        counted = "yes" if row.counted else ("dropped" if converged else "no")
        epochs = row.epochs_to_target
        table.add_row(
            str(seed), row.status.value, seconds(row.time_to_train_ms), "-" if epochs is None else f"{epochs:g}",
            counted, "" if converged else row.reason,
        )
    return table


def show_score(out: Output, summary: Summary | None, score: Score, *, as_json: bool) -> None:
    """A scored run as commands print it: the summary as JSON, or the per-seed table and score lines."""
    if as_json:
        out.json(summary.to_json() if summary else score.to_json())
        return
    out.table(seeds_table(score))
    out.lines(score_lines(summary, score))


def score_lines(summary: Summary | None, score: Score) -> list[str]:
    ttt = score.time_to_train_ms
    lines = []
    if summary is not None:
        caveat = PROFILE_CAVEAT.get(summary.profile, summary.profile)
        lines.append(f"{summary.workload} ({caveat}), run {summary.run_id}")
    lines.append(f"runs {score.runs}, converged {score.converged}, non-converged {score.non_converged}"
                 + (f", unfinished {score.unfinished}" if score.unfinished else ""))
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
    mlcommons = summary.mlcommons if summary is not None else None
    if mlcommons is not None:
        theirs = mlcommons.summarizer_score_min
        verdict = "agrees" if mlcommons.agrees else "DISAGREES"
        shown = "no score" if theirs is None else f"{theirs:.4f} min"
        lines.append(f"mlperf_logging result_summarizer on {mlcommons.folder}: {shown} ({verdict})")
    lines.append("result: VALID" if score.valid else f"result: INVALID: {score.reason}")
    return lines
