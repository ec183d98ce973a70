"""Where mltrain finds its own files (profiles, workloads, Dockerfiles) and keeps caches.

The run layout inside a results folder is `orchestrator.results.paths`; this module holds only
the places outside it.
"""

from __future__ import annotations

import os
from pathlib import Path


def project_root() -> Path:
    """The folder holding seeds.yaml, workloads/ and docker/."""
    return Path(__file__).resolve().parents[2]


def default_results_dir() -> Path:
    return project_root() / "results"


def default_seeds_file() -> Path:
    return project_root() / "seeds.yaml"


def workloads_dir() -> Path:
    return project_root() / "workloads"


def data_cache_dir() -> Path:
    """Where synthetic datasets are made on first use."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "mltrain" / "data"
