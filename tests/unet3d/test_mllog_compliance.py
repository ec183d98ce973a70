"""Logs written by the trainer against the official checker (mlperf_logging.compliance_checker, 4.0.0)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from workloads.unet3d import train

PROJECT = Path(__file__).resolve().parents[2]
TINY_ARGS = [
    "--filters", "4,8", "--input-shape", "16", "--batch-size", "2", "--learning-rate", "0.5",
    "--lr-warmup-epochs", "1", "--start-eval-at", "1", "--evaluate-every", "1", "--threads", "1", "--seed", "2",
]


@pytest.fixture(scope="module")
def tiny_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("unet3d_mllog") / "data"
    subprocess.run(
        [sys.executable, "-m", "workloads.unet3d.dataset", "synthesize", str(out), "--cases", "8",
         "--size", "16,16,16", "--min-shape", "16", "--seed", "0", "--workers", "1", "--eval-cases", "2"],
        cwd=PROJECT, check=True, capture_output=True,
    )
    return out


def write_log(data: Path, results: Path, profile: str, *extra: str) -> Path:
    old = dict(os.environ)
    os.environ.update({"MLTRAIN_PROFILE": profile, "QUALITY_THRESHOLD": "1e-12"})
    try:
        code = train.main(["--data-dir", str(data), "--results-dir", str(results), *TINY_ARGS, *extra])
    finally:
        os.environ.clear()
        os.environ.update(old)
    assert code == 0
    return results / "unet3d.log"


def check(log: Path, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mlperf_logging.compliance_checker", "--usage", "training", "--ruleset", "4.0.0",
         str(log)],
        cwd=cwd, capture_output=True, text=True, timeout=120,
    )


def test_smoke_log_passes_the_open_division_rules(tiny_data, tmp_path):
    log = write_log(tiny_data, tmp_path / "r", "smoke", "--max-epochs", "2")
    result = check(log, tmp_path)
    output = result.stdout + result.stderr
    assert result.returncode == 0 and "SUCCESS" in output, output
    assert "open_unet3d.yaml" in output


def test_a_tiny_dataset_is_open_and_would_fail_the_closed_rules_it_does_not_claim(tiny_data, tmp_path):
    # Labels are honest: outside the smoke profile, a shrunk model on 8 cases with a fixed seed is open.
    log = write_log(tiny_data, tmp_path / "r", "qualify", "--max-epochs", "1")
    lines = log.read_text().splitlines()
    first = json.loads(lines[0].split(":::MLLOG ", 1)[1])
    assert first["key"] == "cache_clear"
    division = next(json.loads(line.split(":::MLLOG ", 1)[1]) for line in lines if '"submission_division"' in line)
    assert division["value"] == "open" and "8 cases" in division["metadata"]["reason"]
    result = check(log, tmp_path)
    output = result.stdout + result.stderr
    assert result.returncode == 0 and "SUCCESS" in output and "open_unet3d.yaml" in output, output
    # The checker is really applied: relabelled closed, the same log fails the 168/42 split and the target.
    relabelled = tmp_path / "closed.log"
    relabelled.write_text(log.read_text().replace('"value": "open"', '"value": "closed"'))
    result = check(relabelled, tmp_path)
    output = result.stdout + result.stderr
    assert "SUCCESS" not in output and "closed_unet3d.yaml" in output and "FAILED" in output
    failed = sorted({line.split("'")[1] for line in output.splitlines() if "CHECK for '" in line})
    assert failed == ["eval_samples", "train_samples"], output
    assert "Failed checks for eval_accuracy :  v['value'] >= 0.908" in output
