"""``mltrain score``: score a stored run again from its records (after a rule change, say)."""

from __future__ import annotations

from pathlib import Path

import typer

from orchestrator.commands.common import JSON_OPTION, RESULTS_OPTION, open_store, output


def register(app: typer.Typer) -> None:
    app.command("score", short_help="Score a run by its profile's rules.")(score)


def score(
    ctx: typer.Context,
    run_id: str = typer.Argument(..., help="Run id (see `mltrain list`)."),
    results: Path = RESULTS_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Score RUN_ID with its profile's rules and store the summary (refused while a run is in progress).

    Exit status: 0 a valid result; 1 an invalid one; 3 a seed was ended by an infrastructure fault."""
    from orchestrator.render.tables import retry_hint, show_score
    from orchestrator.session.scoring import exit_code, rescore

    out = output(ctx)
    run = open_store(results).open(run_id).locked()
    try:
        summary, result = rescore(run)
        run.save_summary(summary)
    finally:
        run.close()
    show_score(out, summary, result, as_json=as_json, records=run.finished_records())
    if retry_hint(run):
        out.warning(retry_hint(run))
    code = exit_code(run, result)
    if code:
        raise typer.Exit(code)
