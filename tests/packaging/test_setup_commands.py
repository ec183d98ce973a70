"""The README has exactly two set-up commands, and CI runs the second as it is written."""

from __future__ import annotations

import re
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[2]


def setup_commands() -> list[str]:
    text = (PROJECT / "README.md").read_text()
    section = text.split("\n## Set up\n", 1)[1].split("\n## ", 1)[0]
    return [block.strip() for block in re.findall(r"^```\n(.*?)^```", section, flags=re.S | re.M)]


def test_the_readme_has_two_one_line_set_up_commands():
    commands = setup_commands()
    assert len(commands) == 2 and all("\n" not in c for c in commands), commands
    install, tests = commands
    assert "mltrain run unet3d" in install and "pip install torch==2.13.0" in install
    assert tests.endswith("python -m pytest") and "[workloads,dev]" in tests


def test_ci_runs_the_readme_test_command_in_a_fresh_venv():
    script = (PROJECT / ".ci" / "run").read_text().strip().splitlines()
    assert script[-1] == setup_commands()[1]
    assert "rm -rf .venv" in script, "the venv must be made afresh"
