"""Where mltrain reads its own files and writes results: never next to the installed code."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.config import locations

PROJECT = Path(__file__).resolve().parents[2]


def test_a_checkout_reads_its_files_in_place():
    assert locations.python_root() == PROJECT
    assert locations.project_files() == PROJECT
    assert locations.default_seeds_file() == PROJECT / "seeds.yaml"
    assert (locations.workloads_dir() / "unet3d" / "workload.yaml").is_file()


def test_results_go_to_the_current_folder_or_where_the_environment_says(tmp_path: Path, monkeypatch):
    monkeypatch.delenv(locations.RESULTS_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    assert locations.default_results_dir() == tmp_path / "results"
    monkeypatch.setenv(locations.RESULTS_ENV, str(tmp_path / "elsewhere"))
    assert locations.default_results_dir() == tmp_path / "elsewhere"


@pytest.mark.parametrize("by_env", [False, True])
def test_run_without_results_writes_where_the_user_is(cli, tmp_path: Path, monkeypatch, by_env: bool):
    monkeypatch.chdir(tmp_path)
    expected = tmp_path / ("from-env" if by_env else "results")
    if by_env:
        monkeypatch.setenv(locations.RESULTS_ENV, str(expected))
    else:
        monkeypatch.delenv(locations.RESULTS_ENV, raising=False)
    in_checkout = set((PROJECT / "results").iterdir())
    assert cli("run", "fakebench", "--seeds", "1-3").code == 0
    assert [p.name for p in expected.iterdir() if p.is_dir()][0].startswith("fakebench-qualify-")
    assert set((PROJECT / "results").iterdir()) == in_checkout
