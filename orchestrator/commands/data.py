"""``mltrain data NAME ACTION ...``: a training workload's dataset command line, or an inference
model's (its harness's, the model named after the action)."""

from __future__ import annotations

from pathlib import Path

import typer

from orchestrator.commands.common import output, registry

USAGE = """\
Usage: mltrain data NAME [ACTION ARGS...]

  Prepare, check or make the dataset of NAME, a training workload or an inference model (a name that
  is both is the training workload's). ACTION and what follows go to its dataset command line as
  they are; without one: how to get the data, then the actions.

  Training workloads: {workloads}
  Inference models:   {models}

  A training workload's actions: how-to-get, synthesize OUT, check DIR, prepare SRC --cache DIR, and
  its own; an inference model's: how-to-get, check DIR, prepare SRC --cache DIR, smoke OUT, and its
  own. `mltrain data NAME --help` lists them."""


def register(app: typer.Typer) -> None:
    app.command(
        "data",
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []},
    )(data)


def data(
    ctx: typer.Context,
    name: str = typer.Argument(..., metavar="NAME", help="A training workload or an inference model."),
) -> None:
    """Prepare, check or make the dataset of a training workload or an inference model; `mltrain data --help`."""
    from orchestrator.config.locations import python_root
    from orchestrator.errors import UsageError
    from orchestrator.inference.declaration import all_models
    from orchestrator.runners import proc

    out = output(ctx)
    known = registry()
    models = all_models(known.roots)
    if name in ("--help", "-h"):
        out.data(USAGE.format(workloads=", ".join(known.names()) or "none", models=", ".join(sorted(models)) or "none"))
        return
    args = list(ctx.args)
    if name in known.names():
        spec = known.get(name)
        declared, argv, how = f"{spec.folder / 'workload.yaml'} field data.cli", spec.data_argv(), spec.data.how_to_get
        forward = args
    elif name in models:
        harness = models[name]
        facts = harness.model(name)
        declared, argv = f"{harness.folder / 'inference.yaml'} field data.cli", list(harness.data.cli)
        how = f"The {name} model: {facts.how_to_get.model.strip()}\nThe {name} data: {facts.how_to_get.data.strip()}"
        forward = [args[0], name, *args[1:]] if args and not args[0].startswith("-") else args
    else:
        raise UsageError(f"unknown workload or inference model {name!r}: workloads are "
                         f"{', '.join(known.names()) or 'none'}; inference models are {', '.join(sorted(models))}")
    if not args or args == ["how-to-get"]:
        out.data(how.strip() or f"{name}: see `mltrain data {name} --help`")
        if args:
            return
        forward = ["--help"]
    proc.check_program(argv, declared)
    env = proc.child_env({}, pythonpath=python_root())
    # The user's folder: the paths they give (`synthesize out`, `check ready`) are relative to it.
    result = proc.run([*argv, *forward], cwd=Path.cwd(), env=env, timeout_s=7 * 24 * 3600, capture=False)
    if result.returncode != 0:
        raise typer.Exit(result.returncode)
