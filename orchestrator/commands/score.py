"""``mltrain score``: score a stored run again from its records (after a rule change, say)."""

from __future__ import annotations

from pathlib import Path

import typer

from orchestrator.commands.common import JSON_OPTION, RESULTS_OPTION, results_dir
from orchestrator.errors import EXIT_INVALID_RESULT
from orchestrator.output import Output
from orchestrator.render.tables import show_score
from orchestrator.results import store
from orchestrator.session import loop as benchmark


def register(app: typer.Typer) -> None:
    app.command("score")(score)


def score(
    run_id: str = typer.Argument(..., help="Run id (see `mltrain list`)."),
    results: Path = RESULTS_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Score RUN_ID with its profile's rules and store the summary."""
    out = Output()
    folder = results_dir(results)
    run = store.open_run(folder, run_id)
    summary, result = benchmark.rescore(run)
    store.write_summary(run.paths, summary)
    store.sync_run(folder, run_id)
    show_score(out, summary, result, as_json=as_json)
    if not result.valid:
        raise typer.Exit(EXIT_INVALID_RESULT)
