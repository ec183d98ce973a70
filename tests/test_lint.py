"""`ruff check .` is part of the test command, so CI and a developer run the same checks."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

PROJECT = Path(__file__).resolve().parents[1]


def test_ruff_finds_nothing():
    ruff = shutil.which("ruff")
    if ruff is None:
        pytest.fail("ruff is not installed: install the dev extra (pip install -e '.[workloads,dev]')")
    result = subprocess.run([ruff, "check", "."], cwd=PROJECT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout[-3000:]
