"""The whole loop on a CPU, as a user runs it: `mltrain run unet3d --profile smoke --seeds 1` trains the
tiny 3D U-Net on synthetic KiTS19, `mltrain export RUN --model` writes it as the inference reference's
ONNX model, and `mltrain infer 3d-unet --profile smoke --model RUN` runs it in every LoadGen scenario,
the accuracy run scoring the reference's Dice on the synthetic inference cases, each run exit 0; the
file `mltrain export` wrote runs the same with `--model FILE`."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from orchestrator.config.locations import python_root

pytestmark = pytest.mark.slow  # about 2 minutes on 2 cores: one training seed, an export, four harness runs

SCENARIOS = ("SingleStream", "MultiStream", "Server", "Offline")


def test_train_export_and_infer_in_every_scenario(cli, mltrain_env, monkeypatch, tmp_path: Path):
    monkeypatch.setenv("MLTRAIN_WORKLOADS", str(python_root() / "workloads"))  # the real unet3d workload
    monkeypatch.setenv("MLTRAIN_SEEDS_FILE", str(python_root() / "seeds.yaml"))
    results = tmp_path / "r"
    trained = cli("run", "unet3d", "--profile", "smoke", "--seeds", "1", "--results", str(results), "--json")
    assert trained.code in (0, 1), trained.err
    run_id = json.loads(trained.out)["run_id"]

    exported = cli("export", run_id, "--model", str(tmp_path / "unet.onnx"), "--results", str(results), "--json")
    assert exported.code == 0, exported.err
    assert json.loads(exported.out) == {"model": str(tmp_path / "unet.onnx"), "run": run_id, "seed": 1,
                                        "feeds": "3d-unet"}
    sha = hashlib.sha256((tmp_path / "unet.onnx").read_bytes()).hexdigest()

    for scenario in SCENARIOS:
        r = cli("infer", "3d-unet", "--profile", "smoke", "--model", run_id, "--scenario", scenario,
                "--results", str(results), "--json")
        assert r.code == 0, r.err  # the smoke rule: the pipeline ran, the target of the model's own Dice met
        record = json.loads(r.out)
        assert record["state"] == "finished" and record["model_source"] == f"{run_id} seed 1"
        assert record["result"]["accuracy"]["target_percent"] == pytest.approx(
            0.999 * record["result"]["accuracy"]["percent"], rel=1e-4)  # of its own Dice on these cases
        assert record["model_sha256"] == sha  # the file `mltrain export` wrote, made again the same
        accuracy = record["result"]["accuracy"]
        assert accuracy["metric"] == "DICE" and accuracy["samples"] == 7  # the synthetic set's inference cases
        assert accuracy["line"].startswith("Accuracy: mean = ") and 0 < accuracy["percent"] <= 100
        assert "comparable with nothing" in " ".join(record["result"]["official_gaps"])
        assert record["result"]["performance"]["scenario"] == scenario

    file_run = cli("infer", "3d-unet", "--profile", "smoke", "--model", str(tmp_path / "unet.onnx"), "--results",
                   str(results), "--json")  # the file `mltrain export` wrote runs where the run id does
    assert file_run.code == 0, file_run.err
    assert json.loads(file_run.out)["model_sha256"] == sha

    refused = cli("export", run_id, "--model", str(tmp_path / "again.onnx"), "--seed", "2", "--results", str(results))
    assert refused.code == 2 and "has no finished seed 2" in refused.err
