"""The smoke profile on real data (issue 22): KiTS19 prepared to 128^3 and larger volumes made every
seed time out at 5 minutes, because evaluation slid a 24^3 window over whole volumes (2.5 minutes a
160x256x256 case on 2 cores). The profile's `real_data` cuts evaluation and training cases and crops
evaluation volumes around a kidney; the workload logs what it cut; nothing changes without them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from orchestrator.config.profiles import load_profiles
from workloads.unet3d import train
from workloads.unet3d.cuts import Cuts, foreground_crop
from workloads.unet3d.data_loader import EvalDataset
from workloads.unet3d.knobs import config_from_args

PROJECT = Path(__file__).resolve().parents[2]
PATHS = ["--data-dir", "/data", "--results-dir", "/results"]
SMOKE_SEED_BOUND_S = 150.0
"""Half the smoke profile's 5-minute timeout: a seed on real-size data must finish well inside it."""


def smoke_env(real: bool) -> dict[str, str]:
    """What a smoke seed is told, as seeds.yaml says it (real: with its real_data env)."""
    profile = load_profiles(PROJECT / "seeds.yaml").workloads["unet3d"]["smoke"]
    assert profile.real_data is not None, "the smoke profile must say what it cuts on real data"
    env = {**profile.env, **(profile.real_data.env if real else {}), "MLTRAIN_PROFILE": "smoke",
           "QUALITY_THRESHOLD": repr(profile.target)}
    return {k: ("1" if k == "THREADS" and v == "auto" else v) for k, v in env.items()}  # one thread: 2 shared cores


def read_log(path: Path) -> list[dict]:
    return [json.loads(line.split(":::MLLOG ", 1)[1]) for line in path.read_text().splitlines() if ":::MLLOG" in line]


def test_no_knob_no_cut_and_the_mlperf_configuration_is_unchanged():
    config = config_from_args(PATHS, {})
    assert not config.cuts.any and config.force_open is None
    assert config.cuts.select(["a", "b"], ["c", "d", "e"]) == (["a", "b"], ["c", "d", "e"])


def test_the_knobs_set_the_cut_and_force_the_open_division():
    config = config_from_args(PATHS, {"EVAL_CASES": "2", "EVAL_CROP": "48,96,96", "TRAIN_CASES": "8"})
    assert config.cuts == Cuts(eval_cases=2, eval_crop=(48, 96, 96), train_cases=8)
    assert config.force_open is not None and "cut" in config.force_open
    with pytest.raises(ValueError, match="eval_cases must be >= 1"):
        config_from_args(PATHS, {"EVAL_CASES": "0"})


def test_the_cut_is_said_in_one_sentence():
    value = Cuts(eval_cases=2, eval_crop=(48, 96, 96), train_cases=8).log_value(
        [f"t{i}" for i in range(168)], [f"e{i}" for i in range(42)])
    assert value["text"] == ("evaluated 2 of 42 cases, cropped to at most 48x96x96 around a kidney;"
                             " trained on 8 of 168 cases")
    counts = (value["eval_cases"], value["eval_cases_of"], value["train_cases"], value["train_cases_of"])
    assert counts == (2, 42, 8, 168)


def test_the_crop_is_centred_on_the_largest_kidney_and_stays_inside():
    label = np.zeros((1, 40, 100, 100), dtype=np.uint8)
    label[0, 10:20, 40:60, 5:25] = 1  # the larger kidney, at the left edge
    label[0, 12:18, 45:55, 80:90] = 2  # a smaller one far right: a box around both would centre on the spine
    box = foreground_crop(label, (16, 32, 32))
    assert box[1:] == (slice(7, 23), slice(34, 66), slice(0, 32))
    assert (label[box] == 1).sum() == (label == 1).sum()
    assert foreground_crop(np.zeros((1, 8, 8, 8), np.uint8), (4, 16, 4))[1:] == (slice(2, 6), slice(0, 8), slice(2, 6))


def test_eval_dataset_crops_only_when_asked(tmp_path: Path):
    image = np.arange(2 * 30 * 30, dtype=np.float32).reshape(1, 2, 30, 30)
    label = np.zeros(image.shape, np.uint8)
    label[0, :, 20:24, 20:24] = 1
    np.save(tmp_path / "case_00000_x.npy", image)
    np.save(tmp_path / "case_00000_y.npy", label)
    whole = EvalDataset(tmp_path, ["case_00000"])[0]
    assert whole[0].shape == (1, 2, 30, 30) and np.array_equal(whole[0].numpy(), image)
    cropped = EvalDataset(tmp_path, ["case_00000"], (8, 10, 10))[0]
    assert cropped[0].shape == cropped[1].shape == (1, 2, 10, 10) and int(cropped[1].sum()) == 32


@pytest.fixture(scope="module")
def real_size_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """6 raw-layout cases as large as KiTS19's after preprocessing (about 160x256x256, KiTS19's
    spacing), prepared the way `mltrain run --data RAW` prepares them (128^3 padding): cases 0, 3 and
    5 evaluate (the reference's list), 1, 2 and 4 train."""
    root = tmp_path_factory.mktemp("real-size")
    cli = [sys.executable, "-m", "workloads.unet3d.dataset"]
    subprocess.run([*cli, "generate-raw", str(root / "raw"), "--cases", "6", "--size", "160,256,256", "--seed", "0",
                    "--workers", "2"], cwd=PROJECT, check=True, capture_output=True)
    done = subprocess.run([*cli, "prepare", str(root / "raw"), "--cache", str(root / "cache"), "--workers", "2"],
                          cwd=PROJECT, check=True, capture_output=True, text=True)
    return Path(done.stdout.strip())


@pytest.mark.slow
def test_a_smoke_seed_on_real_size_data_finishes_within_the_bound_and_says_what_it_cut(
        real_size_data: Path, tmp_path: Path):
    assert np.load(real_size_data / "case_00000_x.npy", mmap_mode="r").shape[1:] >= (150, 250, 250)
    old = dict(os.environ)
    os.environ.update(smoke_env(real=True))
    started = time.monotonic()
    try:
        code = train.main(["--data-dir", str(real_size_data), "--results-dir", str(tmp_path), "--seed", "1"])
    finally:
        os.environ.clear()
        os.environ.update(old)
    seconds = time.monotonic() - started
    log = read_log(tmp_path / "unet3d.log")
    keys = [e["key"] for e in log]
    assert code == 0 and keys[-1] == "run_stop" and "eval_accuracy" in keys
    assert seconds < SMOKE_SEED_BOUND_S, f"a smoke seed on real-size data took {seconds:.0f} s"
    cut = next(e for e in log if e["key"] == "cuts")["value"]
    assert cut["text"] == "evaluated 2 of 3 cases, cropped to at most 48x96x96 around a kidney; trained on 3 of 3 cases"
    assert keys.index("run_start") < keys.index("cuts") < keys.index("eval_samples")
    assert next(e for e in log if e["key"] == "eval_samples")["value"] == 2
