"""Every path a command hands to a job is absolute (`runners.base.JobSpec`, `HostPath`): a job runs in
its bundle's folder (or a container, or a Slurm node), where a path relative to the folder mltrain
was started in names something else. Run, infer and qualify, each started with relative paths."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.inference import tiny


def test_run_with_a_relative_results_folder_gives_its_seeds_their_own_results_folder(
        cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    r = cli("run", "fakebench", "--seeds", "1-3", "--results", "r", "--json")
    assert r.code == 0, r.err
    run = tmp_path / "r" / json.loads(r.out)["run_id"]
    copies = sorted(run.glob("**/results/mllog.txt"))  # fakebench copies its log into RESULTS_DIR when it is a folder
    assert len(copies) == 3, sorted(str(p.relative_to(run)) for p in run.glob("**/*"))


@pytest.mark.parametrize("results", ["r", "."])
def test_infer_with_relative_model_data_and_results(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    results: str) -> None:
    tiny.export(tmp_path / "tiny.onnx")
    tiny.dataset(tmp_path / "data")
    monkeypatch.chdir(tmp_path)
    r = cli("infer", "resnet50", "--model", "tiny.onnx", "--data", "data", "--results", results,
            "--count", str(tiny.IMAGES), "--time", "0.2", "--json")
    assert r.code in (0, 1), r.err
    record = json.loads(r.out)
    assert record["state"] == "finished" and (tmp_path / results / record["run_id"] / "user.conf").is_file()


def test_infer_with_a_relative_results_folder_from_the_environment(cli, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    model, data = tiny.export(tmp_path / "tiny.onnx"), tiny.dataset(tmp_path / "data")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLTRAIN_RESULTS", "env-results")
    r = cli("infer", "resnet50", "--model", str(model), "--data", str(data), "--count", str(tiny.IMAGES),
            "--time", "0.2", "--json")
    assert r.code in (0, 1), r.err
    assert (tmp_path / "env-results" / json.loads(r.out)["run_id"] / "user.conf").is_file()


def test_qualify_with_a_relative_results_folder_measures_the_throughput(cli, tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    r = cli("qualify", "--suite", "throughput_only", "--results", "q", "--node-name", "n1", "--json",
            "--expect-gpus", "0")  # a CPU node, declared so: it may PASS
    assert r.code == 0, r.err
    checks = {c["name"]: c for c in json.loads(r.out)["checks"]}
    assert checks["throughput"]["status"] == "pass", checks["throughput"]["reasons"]
