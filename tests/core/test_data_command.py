"""`mltrain data WORKLOAD ...` runs the workload's dataset command line from the user's folder:
relative paths mean what the user standing there means, never the installed workload's folder."""

from __future__ import annotations

from pathlib import Path

import pytest

FAKEBENCH = Path(__file__).resolve().parents[1] / "workloads" / "fakebench"


def test_relative_paths_are_the_users(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    before = sorted(p.name for p in FAKEBENCH.iterdir())
    made = cli("data", "fakebench", "synthesize", "ready")
    assert made.code == 0
    assert (tmp_path / "ready").is_dir() and sorted(p.name for p in FAKEBENCH.iterdir()) == before
    checked = cli("data", "fakebench", "check", "ready")
    assert checked.code == 0
    missing = cli("data", "fakebench", "check", "elsewhere")
    assert missing.code != 0  # the folder beside the user, not one inside the workload
