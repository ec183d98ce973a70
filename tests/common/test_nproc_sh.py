"""NPROC as the run scripts resolve it (workloads/common/nproc.sh, sourced from the project root)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GPU_NODES = list(Path("/dev").glob("nvidia[0-9]*")) + [p for p in [Path("/dev/dxg")] if p.exists()]


def resolve(nproc: str | None, **extra: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "NPROC"}
    if nproc is not None:
        env["NPROC"] = nproc
    return subprocess.run(["bash", "-c", 'set -euo pipefail; source workloads/common/nproc.sh; echo "$NPROC"'],
                          cwd=ROOT, env={**env, **extra}, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("given", ["1", "3", "16"])
def test_a_whole_number_is_kept(given: str):
    done = resolve(given)
    assert (done.returncode, done.stdout.strip()) == (0, given)


@pytest.mark.skipif(bool(GPU_NODES), reason="a GPU node is present: auto asks torch")
@pytest.mark.parametrize("given", [None, "", "auto"])
def test_auto_without_a_gpu_node_is_one_without_starting_python(given: str | None):
    done = resolve(given, PYTHON="/nonexistent/python")  # never started: no GPU device node
    assert (done.returncode, done.stdout.strip()) == (0, "1")


@pytest.mark.parametrize("given", ["0", "two", "-1", "1.5", "01 2"])
def test_anything_else_is_one_line_and_exit_2(given: str):
    done = resolve(given)
    assert done.returncode == 2 and done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert "NPROC must be auto or a whole number >= 1" in lines[0] and f"'{given}'" in lines[0], lines[0]
