"""A private Slurm cluster of two nodes on this machine (.ci/slurm-cluster.sh), started and stopped by PID."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / ".ci" / "slurm-cluster.sh"


@contextlib.contextmanager
def started_cluster() -> Iterator[str]:
    """A cluster of this machine's own (.ci/slurm-cluster.sh: its own folder, controller port and
    daemons), SLURM_CONF yielded; every daemon stopped by PID afterwards. Skips where none can start."""
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
