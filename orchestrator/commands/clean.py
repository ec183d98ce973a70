"""``mltrain clean``: remove containers that a killed orchestrator left behind (found by label)."""

from __future__ import annotations

import typer

from orchestrator.commands.common import JSON_OPTION, output


def register(app: typer.Typer) -> None:
    app.command("clean", short_help="Stop and remove mltrain's containers.")(clean)


def clean(
    ctx: typer.Context,
    run: str = typer.Option(None, "--run", help="Only the containers of this run id."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Stop and remove every mltrain container (of one run with --run). Runs in progress lose theirs."""
    from orchestrator.results.paths import check_run_id
    from orchestrator.runners.docker.engine import connect, remove_leftovers

    out = output(ctx)
    if run is not None:
        check_run_id(run)
    removed = remove_leftovers(connect(), run)
    if as_json:
        out.json({"removed": removed})
        return
    for name in removed:
        out.data(f"removed {name}")
    out.status(f"{len(removed)} container(s) removed")
