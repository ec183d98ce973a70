"""Options and look-ups shared by the commands."""

from __future__ import annotations

import os
from pathlib import Path

import typer

from orchestrator.config.locations import default_results_dir, default_seeds_file, workloads_dir
from orchestrator.config.workloads import Registry
from orchestrator.results.store import Store, check_results_dir

RESULTS_OPTION = typer.Option(None, "--results", help="Results folder (default: results/ of the project).")
JSON_OPTION = typer.Option(False, "--json", help="Machine-readable output on stdout.")
WORKLOADS_ENV = "MLTRAIN_WORKLOADS"
"""Extra folders of workloads (os.pathsep-separated), searched before the project's own."""


def results_dir(given: Path | None) -> Path:
    folder = (given or default_results_dir()).expanduser()
    check_results_dir(folder)
    return folder


def open_store(given: Path | None) -> Store:
    """The results folder a command works on (``--results``, else the default)."""
    return Store(results_dir(given))


def seeds_file() -> Path:
    return Path(os.environ.get("MLTRAIN_SEEDS_FILE", str(default_seeds_file())))


def registry() -> Registry:
    extra = [Path(p) for p in os.environ.get(WORKLOADS_ENV, "").split(os.pathsep) if p]
    return Registry([*extra, workloads_dir()])
