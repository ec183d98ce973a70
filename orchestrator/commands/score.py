"""``mltrain score``: score a stored run again from its records (after a rule change, say)."""

from __future__ import annotations

from pathlib import Path

import typer

from orchestrator.commands.common import JSON_OPTION, RESULTS_OPTION, open_store
from orchestrator.errors import EXIT_INVALID_RESULT
from orchestrator.output import Output
from orchestrator.render.tables import show_score
from orchestrator.session.loop import rescore


def register(app: typer.Typer) -> None:
    app.command("score")(score)


def score(
    run_id: str = typer.Argument(..., help="Run id (see `mltrain list`)."),
    results: Path = RESULTS_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Score RUN_ID with its profile's rules and store the summary."""
    out = Output()
    run = open_store(results).open(run_id)
    summary, result = rescore(run)
    run.save_summary(summary)
    show_score(out, summary, result, as_json=as_json)
    if not result.valid:
        raise typer.Exit(EXIT_INVALID_RESULT)
