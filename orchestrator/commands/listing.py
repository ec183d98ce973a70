"""``mltrain list`` and ``mltrain show``: what the store holds."""

from __future__ import annotations

from pathlib import Path

import typer

from orchestrator.commands.common import JSON_OPTION, RESULTS_OPTION, WIDE_OPTION, open_store, output


def register(app: typer.Typer) -> None:
    app.command("list", short_help="List the stored runs, newest first.")(list_runs)
    app.command("show", short_help="Show one run: manifest, seeds, score.")(show)


SHOWN = 50
"""Runs the table shows by default (a store may hold thousands; --json lists them all)."""


def list_runs(
    ctx: typer.Context,
    results: Path = RESULTS_OPTION,
    workload: str = typer.Option(None, "--workload", help="Only runs of this workload."),
    label: str = typer.Option(None, "--label", help="Only runs with this label."),
    last: int = typer.Option(SHOWN, "--last", min=1, metavar="N", help="The table shows this many, newest first."),
    every: bool = typer.Option(False, "--all", help="The table shows every run (--json always does)."),
    wide: bool = WIDE_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """List benchmark runs, newest first (damaged run folders are named, and the exit code is 2)."""
    from orchestrator.errors import EXIT_USAGE
    from orchestrator.render.tables import runs_table

    out = output(ctx)
    newest = None if as_json or every else last
    listing = open_store(results, write=False).list(label=label, workload=workload, newest=newest)
    if listing.note:
        out.warning(listing.note)
    if as_json:
        out.json(listing.rows)
    else:
        fitted = runs_table(listing.rows, total=listing.total, width=None if wide else out.out.width)
        out.table(fitted.table, width=fitted.width)
        if fitted.note():
            out.prose(fitted.note())
        if len(listing.rows) < listing.total:
            out.prose(f"{listing.total - len(listing.rows):,} older run(s) not shown: --last N, --all or --json")
    for broken in listing.broken:
        out.error(f"run {broken.run_id} cannot be read: {broken.problem}")
    if listing.broken:
        raise typer.Exit(EXIT_USAGE)


def show(
    ctx: typer.Context,
    run_id: str = typer.Argument(..., help="Run id (see `mltrain list`)."),
    results: Path = RESULTS_OPTION,
    wide: bool = WIDE_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Show one run: manifest, per-seed results and score (an inference run: its LoadGen result; a
    run that decided its own seed count: its rule and decisions too)."""
    from orchestrator.render.tables import run_lines, show_score
    from orchestrator.session.scoring import rescore

    out = output(ctx)
    store = open_store(results, write=False)
    if store.is_inference(run_id):
        from orchestrator.render.inference import result_lines

        record = store.open_inference(run_id)
        record = record.model_copy(update={"state": store.state(run_id, record.state)})  # as `list` says it
        if as_json:
            out.json(record.to_json())
        else:
            out.lines(result_lines(record, store.root / run_id))
        return
    run = store.open(run_id)
    summary, score = rescore(run)
    if as_json:
        decisions = {"decisions": run.decisions.to_json()} if run.decisions is not None else {}
        manifest = {**run.manifest.to_json(), "state": run.state}  # as `list` says it
        out.json({"manifest": manifest, "summary": summary.to_json(),
                  "records": {s: r.to_json() for s, r in sorted(run.records.items())}, **decisions})
        return
    out.lines(run_lines(run))
    show_score(out, summary, score, as_json=False, decisions=run.decisions, records=run.finished_records(), wide=wide)
