"""Where mltrain finds its own files (profiles, workloads, Dockerfiles) and keeps results and caches.

mltrain runs from a checkout (an editable install, or ``PYTHONPATH`` set to it) or from an
installed wheel. In a checkout, ``seeds.yaml``, ``workloads/`` and ``docker/`` sit at the top of
the repository, beside ``orchestrator/``. A wheel installs ``orchestrator`` and ``workloads`` as
packages side by side, and ships ``seeds.yaml`` and ``docker/`` as package data under
``orchestrator/bundled/`` (see ``pyproject.toml``). Nothing is ever written next to these files: results
go to the current folder's ``results/`` (or ``--results``, or ``$MLTRAIN_RESULTS``), caches to
the user's cache folder.

The run layout inside a results folder is `orchestrator.results.paths`; this module holds only
the places outside it.
"""

from __future__ import annotations

import os
from pathlib import Path

from orchestrator.errors import StoreError

RESULTS_ENV = "MLTRAIN_RESULTS"
"""Default results folder when ``--results`` is not given (else ``./results``)."""
SEEDS_FILE = "seeds.yaml"
BUNDLED = "bundled"
"""Folder of the orchestrator package that holds seeds.yaml and docker/ in an installed wheel."""


def python_root() -> Path:
    """The folder holding the ``orchestrator`` and ``workloads`` packages: what a child process
    needs on ``PYTHONPATH`` (the checkout, or site-packages)."""
    return Path(__file__).resolve().parents[2]


def project_files() -> Path:
    """The folder holding ``seeds.yaml`` and ``docker/``: a workload's ``image.dockerfile`` is
    relative to it. The checkout when mltrain runs from one, else the wheel's bundled copy."""
    checkout = python_root()
    if (checkout / SEEDS_FILE).is_file():
        return checkout
    return Path(__file__).resolve().parents[1] / BUNDLED


def workloads_dir() -> Path:
    return python_root() / "workloads"


def default_seeds_file() -> Path:
    return project_files() / SEEDS_FILE


def default_results_dir() -> Path:
    """``$MLTRAIN_RESULTS``, else ``results/`` of the current folder: never the install location.
    StoreError (exit 2) when that current folder was deleted (`current_folder`)."""
    return Path(os.environ.get(RESULTS_ENV) or current_folder() / "results")


def current_folder() -> Path:
    """The current folder; StoreError (exit 2) when it was deleted under this shell."""
    try:
        return Path.cwd()
    except FileNotFoundError:
        raise StoreError("the current folder no longer exists (it was deleted): cd to a folder that exists, or give"
                         " --results (or MLTRAIN_RESULTS) an absolute path") from None


def data_cache_dir() -> Path:
    """Where synthetic datasets are made and raw ones prepared on first use."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "mltrain" / "data"
