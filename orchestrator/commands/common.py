"""Options, choices and look-ups shared by the commands.

Command modules import only this, typer and the standard library at the top: the domain modules
they call (scipy, docker, mlperf_logging behind them) are imported inside the command,
so that `mltrain --help` and shell completion stay fast.
"""

from __future__ import annotations

import os
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from orchestrator.config.locations import default_results_dir, default_seeds_file, workloads_dir
from orchestrator.config.profiles import PROFILE_NAMES
from orchestrator.output import Output
from orchestrator.runners.kinds import NAMES as RUNNER_NAMES
from orchestrator.runners.kinds import choices_said

if TYPE_CHECKING:
    from orchestrator.config.workloads import Registry
    from orchestrator.results.store import Store

RESULTS_OPTION = typer.Option(
    None, "--results", help="Results folder (default: $MLTRAIN_RESULTS, else results/ of the current folder)."
)
JSON_OPTION = typer.Option(False, "--json", help="Machine-readable output: stdout holds only JSON.")
WIDE_OPTION = typer.Option(False, "--wide", help="Every column of every table, however wide the terminal.")
WORKLOADS_ENV = "MLTRAIN_WORKLOADS"
"""Extra folders of workloads (os.pathsep-separated), searched before the project's own."""


RunnerName = Enum("RunnerName", {name: name for name in RUNNER_NAMES}, type=str)  # type: ignore[misc]
"""The runners as typer offers them (the table: `orchestrator.runners.kinds`)."""
RUNNERS_SAID = choices_said()
"""Each runner and what it is, for the --runner help texts."""


ProfileName = Enum("ProfileName", {name: name for name in PROFILE_NAMES}, type=str)  # type: ignore[misc]
"""The profiles as typer offers them (the names: `orchestrator.config.profiles`)."""


class IpcMode(str, Enum):
    host = "host"
    private = "private"


class EpochUnit(str, Enum):
    auto = "auto"
    epochs = "epochs"
    samples = "samples"


def output(ctx: typer.Context) -> Output:
    """The output object the app's callback made for this invocation (-q, -v)."""
    root = ctx.find_root()
    return root.obj if isinstance(root.obj, Output) else Output()


def results_dir(given: Path | None, *, write: bool = True) -> Path:
    """The results folder (``--results``, else the default), checked for what the command does with
    it: a command that only reads (``write=False``) works on a read-only store too."""
    from orchestrator.results.store import check_results_dir

    folder = (given or default_results_dir()).expanduser()
    check_results_dir(folder, write=write)
    return folder


def open_store(given: Path | None, *, write: bool = True) -> Store:
    """The results folder a command works on (``--results``, else the default)."""
    from orchestrator.results.store import Store

    return Store(results_dir(given, write=write))


def seeds_file() -> Path:
    return Path(os.environ.get("MLTRAIN_SEEDS_FILE", str(default_seeds_file())))


def registry() -> Registry:
    from orchestrator.config.workloads import Registry

    extra = [Path(p) for p in os.environ.get(WORKLOADS_ENV, "").split(os.pathsep) if p]
    return Registry([*extra, workloads_dir()])
