"""A real Slurm cluster (two nodes on this machine) for the tests of this folder, started once, stopped by PID."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import pytest

from tests.docker.conftest import docker_engine, test_base_image, torch_base_image  # noqa: F401 - fixtures
from tests.slurm.cluster import started_cluster


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[str]:
    """SLURM_CONF of a running cluster (the CI's, or one started here); skips where none can be started."""
    if os.environ.get("SLURM_CONF") and shutil.which("sinfo"):
        yield os.environ["SLURM_CONF"]
        return
    with started_cluster() as conf:
        yield conf


@pytest.fixture
def slurm_env(slurm_cluster: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("SLURM_CONF", slurm_cluster)
    return slurm_cluster
