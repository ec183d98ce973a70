"""Throughput mode through throughput.sh, as the orchestrator runs it (workload.yaml `throughput`)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
TINY = "width=8 layers=1,1,1,1 batch_size=8 workers=0 threads=1"


def throughput(env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "workloads/resnet50/throughput.sh"], cwd=ROOT,
                          env={**os.environ, "NPROC": "1", **env}, capture_output=True, text=True, timeout=120)


def test_workload_yaml_declares_the_throughput_command():
    declared = yaml.safe_load((ROOT / "workloads" / "resnet50" / "workload.yaml").read_text())
    assert declared["throughput"] == ["bash", "throughput.sh"]


def test_random_batches_and_the_loader_give_one_final_throughput_line(tiny_dataset: Path):
    result = throughput({"STEPS": "3", "WARMUP_STEPS": "1", "INPUT_SHAPE": "16", "DATADIR": str(tiny_dataset),
                         "RESNET50_PRESET": "smoke", "RESNET50_SET": TINY})
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stdout.strip().splitlines()
    records = [json.loads(line.split(":::MLLOG ", 1)[1]) for line in lines]
    assert [r["key"] for r in records] == ["resolved_settings", "throughput"]
    settings, final = records[0]["value"], records[1]
    assert settings["device"] == "cpu" and settings["threads"] == 1 and settings["decode"] == "pil"
    meta = final["metadata"]
    assert final["value"] > 0 and meta["unit"] == "samples/s"
    assert (meta["steps"], meta["warmup_steps"], meta["batch_size"], meta["global_batch_size"]) == (3, 1, 8, 8)
    assert meta["step_ms_p10"] <= meta["step_ms_median"] <= meta["step_ms_p90"]
    assert meta["loader_samples_per_second"] > 0 and isinstance(meta["input_bound"], bool)
    assert meta["precision"] == settings["precision"] and meta["device_name"] == settings["device_name"]
    assert abs(final["value"] - 3 * 8 / (3 * meta["step_ms_median"] / 1000)) / final["value"] < 1.0


@pytest.mark.parametrize("datadir", ["", "empty folder"])
def test_without_a_dataset_the_loader_is_not_measured(tmp_path: Path, datadir: str):
    """DATADIR empty, or an empty folder: what `mltrain qualify` mounts at /data without --data
    (resnet50 took the empty folder for a dataset and failed: "missing split folder")."""
    if datadir:
        datadir = str(tmp_path)
    result = throughput({"STEPS": "2", "WARMUP_STEPS": "0", "INPUT_SHAPE": "16,16", "DATADIR": datadir,
                         "RESNET50_PRESET": "smoke", "RESNET50_SET": TINY})
    assert result.returncode == 0, result.stderr[-2000:]
    final = json.loads(result.stdout.strip().splitlines()[-1].split(":::MLLOG ", 1)[1])
    assert final["key"] == "throughput"
    assert (final["metadata"]["loader_samples_per_second"], final["metadata"]["input_bound"]) == (None, None)


def test_bad_input_is_one_line_and_exit_2():
    for env, fragment in [({"STEPS": "many"}, "STEPS must be"), ({"INPUT_SHAPE": "32,16"}, "INPUT_SHAPE must be"),
                          ({"RESNET50_SET": "colour=red"}, "colour=red"), ({"NPROC": "two"}, "NPROC must be"),
                          ({"STEPS": "0"}, "STEPS must be >= 1")]:
        result = throughput({"RESNET50_PRESET": "smoke", **env})
        assert result.returncode == 2, (env, result.stderr)
        lines = result.stderr.splitlines()
        assert len(lines) == 1 and fragment in lines[0] and "Traceback" not in result.stderr, (env, result.stderr)
