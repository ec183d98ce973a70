"""A real Slurm cluster (two nodes on this machine) for the tests of this folder, started once, stopped by PID."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / ".ci" / "slurm-cluster.sh"


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[str]:
    """SLURM_CONF of a running cluster; skips where none can be started (not root, no apt)."""
    if os.environ.get("SLURM_CONF") and shutil.which("sinfo"):
        yield os.environ["SLURM_CONF"]
        return
    if os.geteuid() != 0:
        pytest.skip("starting a Slurm cluster needs root")
    started = subprocess.run(["bash", str(SCRIPT), "start"], capture_output=True, text=True, timeout=600)
    if started.returncode != 0:
        pytest.skip(f"no Slurm cluster: {started.stderr.strip().splitlines()[-1:]}")
    exports = dict(item.split("=", 1) for item in started.stdout.split()[1:])
    try:
        yield exports["SLURM_CONF"]
    finally:
        subprocess.run(["bash", str(SCRIPT), "stop", exports["MLTRAIN_SLURM_DIR"]], timeout=60)


@pytest.fixture
def slurm_env(slurm_cluster: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("SLURM_CONF", slurm_cluster)
    return slurm_cluster
