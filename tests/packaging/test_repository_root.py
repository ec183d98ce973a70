"""The repository root holds the project's layout and nothing else: scratch logs and outputs
(`err.1`..`out.15` once landed here) go to a temporary folder, and ignored files stay untracked."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

PROJECT = Path(__file__).resolve().parents[2]
LAYOUT = {
    "pyproject.toml", "orchestrator", "workloads", "docker", "seeds.yaml", "results", "tests",
    "README.md", ".ci", "qualify.yaml", "benchmarks", "docs", "tools", ".gitignore",
}


def tracked() -> list[str]:
    if not (PROJECT / ".git").exists():
        pytest.skip("not a git checkout")
    done = subprocess.run(["git", "-C", str(PROJECT), "ls-files", "-z"], capture_output=True, check=True)
    return [p for p in done.stdout.decode().split("\0") if p]


def test_the_root_holds_the_layout_and_nothing_else():
    top = {path.split("/", 1)[0] for path in tracked()}
    assert top - LAYOUT == set(), f"not part of the layout: {sorted(top - LAYOUT)}"


def test_no_tracked_file_is_one_git_ignores():
    done = subprocess.run(["git", "-C", str(PROJECT), "ls-files", "-ci", "--exclude-standard", "-z"],
                          capture_output=True, check=True)
    ignored = [p for p in done.stdout.decode().split("\0") if p]
    assert ignored == [], f"tracked although ignored: {ignored}"
