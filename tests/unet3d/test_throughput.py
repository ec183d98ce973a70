"""Throughput mode through the contract's entry (workload.yaml ``throughput``), tiny shapes on the CPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

PROJECT = Path(__file__).resolve().parents[2]
WORKLOAD = PROJECT / "workloads" / "unet3d"
TINY = {"FILTERS": "4,8", "INPUT_SHAPE": "16", "BATCH_SIZE": "2", "STEPS": "4", "WARMUP_STEPS": "1", "THREADS": "1"}


def run_throughput(extra: dict[str, str]) -> subprocess.CompletedProcess:
    argv = yaml.safe_load((WORKLOAD / "workload.yaml").read_text())["throughput"]
    env = {**os.environ, "PYTHON": sys.executable, **TINY, **extra}
    return subprocess.run(argv, cwd=WORKLOAD, env=env, capture_output=True, text=True, timeout=300)


def mllog(stdout: str) -> list[dict]:
    return [json.loads(line.split(":::MLLOG ", 1)[1]) for line in stdout.splitlines() if line.startswith(":::MLLOG ")]


def test_random_batches_give_samples_per_second_on_the_last_line():
    done = run_throughput({})
    assert done.returncode == 0, done.stderr[-2000:]
    events = mllog(done.stdout)
    assert [e["key"] for e in events] == ["resolved_settings", "throughput"]
    assert done.stdout.strip().splitlines()[-1].startswith(":::MLLOG ")
    final = events[-1]
    meta = final["metadata"]
    assert isinstance(final["value"], float) and final["value"] > 0
    assert meta["unit"] == "samples/s" and meta["steps"] == 4 and meta["warmup_steps"] == 1
    assert meta["batch_size"] == 2 and meta["global_batch_size"] == 2
    assert 0 < meta["step_ms_p10"] <= meta["step_ms_median"] <= meta["step_ms_p90"]
    assert meta["loader_samples_per_second"] is None and meta["input_bound"] is None
    assert meta["precision"] == events[0]["value"]["precision"] and meta["device_name"]


def test_an_empty_data_folder_means_random_batches(tmp_path: Path):
    """What a runner mounts at /data when the caller (mltrain qualify without --data) has no dataset."""
    done = run_throughput({"DATADIR": str(tmp_path)})
    assert done.returncode == 0, done.stderr[-2000:]
    assert mllog(done.stdout)[-1]["metadata"]["loader_samples_per_second"] is None


def test_a_folder_without_a_dataset_is_one_line_and_exit_2(tmp_path: Path):
    (tmp_path / "notes.txt").write_text("not a dataset")
    done = run_throughput({"DATADIR": str(tmp_path)})
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr


@pytest.fixture(scope="module")
def tiny_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("unet3d_throughput") / "data"
    subprocess.run(
        [sys.executable, "-m", "workloads.unet3d.dataset", "synthesize", str(out), "--cases", "6",
         "--size", "16,16,16", "--min-shape", "16", "--seed", "0", "--workers", "1", "--eval-cases", "2"],
        cwd=PROJECT, check=True, capture_output=True,
    )
    return out


def test_a_dataset_adds_the_loader_rate_and_the_input_bound_verdict(tiny_data: Path):
    done = run_throughput({"DATADIR": str(tiny_data)})
    assert done.returncode == 0, done.stderr[-2000:]
    meta = mllog(done.stdout)[-1]["metadata"]
    assert meta["loader_samples_per_second"] > 0
    assert meta["input_bound"] == (meta["loader_samples_per_second"] < mllog(done.stdout)[-1]["value"])


def test_a_dataset_smaller_than_the_patch_is_one_line_and_exit_2(tiny_data: Path):
    done = run_throughput({"DATADIR": str(tiny_data), "INPUT_SHAPE": "32"})
    assert done.returncode == 2 and "smaller than the patch" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_two_processes_report_the_global_rate_once(tiny_data: Path):
    done = run_throughput({"NPROC": "2", "BATCH_SIZE": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    events = mllog(done.stdout)
    assert [e["key"] for e in events] == ["resolved_settings", "throughput"]  # rank 0 alone prints
    assert events[-1]["metadata"]["global_batch_size"] == 2 and events[0]["value"]["nproc"] == 2


@pytest.mark.parametrize(
    "extra, message",
    [({"STEPS": "0"}, "steps must be >= 1"), ({"INPUT_SHAPE": "14"}, "multiple of 4"),
     ({"DATADIR": "/nonexistent/unet3d"}, "no such dataset folder"), ({"AMP": "fp8"}, "auto, fp32"),
     ({"NPROC": "two"}, "NPROC must be auto")],
)
def test_bad_input_is_one_line_and_exit_2(extra, message):
    done = run_throughput(extra)
    assert done.returncode == 2 and message in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
