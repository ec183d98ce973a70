"""``mltrain clean``: remove containers that a killed orchestrator left behind (found by label)."""

from __future__ import annotations

import typer

from orchestrator.output import Output
from orchestrator.runners.docker.engine import connect, remove_leftovers


def register(app: typer.Typer) -> None:
    app.command("clean")(clean)


def clean(
    run: str = typer.Option(None, "--run", help="Only the containers of this run id."),
) -> None:
    """Stop and remove every mltrain container (of one run with --run). Runs in progress lose theirs."""
    out = Output()
    removed = remove_leftovers(connect(), run)
    for name in removed:
        out.data(f"removed {name}")
    out.status(f"{len(removed)} container(s) removed")
