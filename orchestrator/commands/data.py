"""``mltrain data WORKLOAD ACTION ...``: the workload's own dataset command line."""

from __future__ import annotations

from pathlib import Path

import typer

from orchestrator.commands.common import output, registry


def register(app: typer.Typer) -> None:
    app.command(
        "data",
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []},
    )(data)


def data(
    ctx: typer.Context,
    workload: str = typer.Argument(..., help="Workload name."),
) -> None:
    """Prepare, check or make WORKLOAD's dataset: how-to-get, verify-raw, preprocess, verify, synthesize, check.
    Everything after WORKLOAD goes to the workload's dataset command line as it is (`mltrain data WORKLOAD
    --help`: its own help)."""
    from orchestrator.config.locations import python_root
    from orchestrator.runners import proc

    if workload in ("-h", "--help"):  # the options after WORKLOAD are the workload's; before it, this help
        output(ctx).data(ctx.get_help())
        return
    spec = registry().get(workload)
    proc.check_program(spec.data.cli, f"{spec.folder / 'workload.yaml'} field data.cli")
    args = list(ctx.args)
    if not args:
        output(ctx).data(spec.data.how_to_get.strip() or f"{workload}: see `mltrain data {workload} --help`")
        args = ["--help"]
    env = proc.child_env({}, pythonpath=python_root())
    # The user's folder: the paths they give (`synthesize out`, `check ready`) are relative to it.
    result = proc.run([*spec.data_argv(), *args], cwd=Path.cwd(), env=env, timeout_s=7 * 24 * 3600, capture=False)
    if result.returncode != 0:
        raise typer.Exit(result.returncode)
