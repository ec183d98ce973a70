"""``mltrain list`` and ``mltrain show``: what the store holds, from its index."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from orchestrator.commands.common import JSON_OPTION, RESULTS_OPTION, results_dir
from orchestrator.output import Output
from orchestrator.render.tables import seconds, show_score
from orchestrator.results import store
from orchestrator.session import loop as benchmark


def register(app: typer.Typer) -> None:
    app.command("list")(list_runs)
    app.command("show")(show)


def list_runs(
    results: Path = RESULTS_OPTION,
    workload: str = typer.Option(None, "--workload", help="Only runs of this workload."),
    label: str = typer.Option(None, "--label", help="Only runs with this label."),
    as_json: bool = JSON_OPTION,
) -> None:
    """List benchmark runs, newest first."""
    out = Output()
    rows = store.list_runs(results_dir(results), label=label, workload=workload)
    if as_json:
        out.json(rows)
        return
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
    out.table(table)


def show(
    run_id: str = typer.Argument(..., help="Run id (see `mltrain list`)."),
    results: Path = RESULTS_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Show one run: manifest, per-seed results and score."""
    out = Output()
    folder = results_dir(results)
    run = store.open_run(folder, run_id)
    summary, score = benchmark.rescore(run)
    if as_json:
        out.json({"manifest": run.manifest, "summary": summary,
                  "records": {s: r.to_json() for s, r in sorted(run.records.items())}})
        return
    m = run.manifest
    out.data(f"run {run.run_id}: {m['workload']} profile {m['profile']} runner {m.get('runner')}"
             f" host {m.get('host')} state {m.get('state')}")
    out.data(f"started {m.get('started_at')} ended {m.get('ended_at')} folder {run.paths.root}")
    show_score(out, summary, score, as_json=False)
