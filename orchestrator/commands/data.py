"""``mltrain data NAME ACTION ...``: a training workload's dataset command line, or an inference
model's (its harness's, the model named after the action)."""

from __future__ import annotations

import re
from pathlib import Path

import typer

from orchestrator.commands.common import output, registry

USAGE = """\
Usage: mltrain data NAME [ACTION ARGS...]

  Prepare, check or make the dataset of NAME, a training workload or an
  inference model (a name that is both is the training workload's). ACTION and
  what follows go to its dataset command line as they are; without one: how to
  get the data, then the actions.

  Training workloads: {workloads}
  Inference models:   {models}

  A training workload's actions: how-to-get, synthesize OUT, check DIR, prepare
  SRC --cache DIR, and its own; an inference model's: how-to-get, check DIR,
  prepare SRC --cache DIR, smoke OUT, and its own. `mltrain data NAME --help`
  lists them."""


def register(app: typer.Typer) -> None:
    app.command(
        "data", short_help="Prepare, check or make a workload's or a model's dataset.",
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
    if any(arg in ("-h", "--help") for arg in forward):  # its help, under the name the user typed
        shown = proc.run([*argv, *forward], cwd=Path.cwd(), env=env, timeout_s=600)
        if shown.stderr:
            out.status(shown.stderr.rstrip())
        out.data(as_typed(shown.stdout, name).rstrip("\n"))
        if shown.returncode != 0:
            raise typer.Exit(shown.returncode)
        return
    result = proc.run([*argv, *forward], cwd=Path.cwd(), env=env, timeout_s=7 * 24 * 3600, capture=False)
    if result.returncode != 0:
        raise typer.Exit(result.returncode)


MODULE_PROG = re.compile(r"\bpython[0-9.]* -m [A-Za-z0-9_.]+|\b[A-Za-z0-9_]+\.py\b")
"""How argparse names a command line started as ``python -m package.module`` (or a script)."""


def as_typed(help_text: str, name: str) -> str:
    """A dataset command line's help with its program named as the user runs it ('mltrain data unet3d'),
    not as mltrain starts it ('python -m workloads.unet3d.dataset'); its usage lines re-indented to match."""
    said: list[str] = []
    shift, in_usage = 0, False
    for line in help_text.splitlines():
        if line.startswith("usage: "):
            renamed = MODULE_PROG.sub(f"mltrain data {name}", line, count=1)
            shift, in_usage = len(line) - len(renamed), True
            line = renamed
        elif in_usage and line.startswith(" ") and line.strip():
            line = line[shift:] if shift > 0 and line[:shift].isspace() else line
        else:
            in_usage = False
        said.append(line)
    return "\n".join(said) + "\n"
