"""The unet3d trainer: schedule, sampling, augmentations, whole runs (in process, run_and_time.sh, torchrun)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from workloads.common.distributed import OUTLIVING_DDP
from workloads.unet3d import train
from workloads.unet3d.augment import BalancedCrop, augment, flip, largest_component_boxes
from workloads.unet3d.config import TrainConfig, learning_rate, resolve_schedule
from workloads.unet3d.data_loader import ShardedShuffleSampler
from workloads.unet3d.model import UNet3DConfig

PROJECT = Path(__file__).resolve().parents[2]
TINY_ARGS = [
    "--filters", "4,8", "--input-shape", "16", "--batch-size", "2", "--learning-rate", "0.5",
    "--lr-warmup-epochs", "1", "--start-eval-at", "1", "--evaluate-every", "1", "--threads", "1",
]
PREAMBLE = [
    "cache_clear", "init_start", "resolved_settings", "seed", "submission_benchmark", "submission_org",
    "submission_division", "submission_status", "submission_platform", "opt_name", "opt_base_learning_rate",
    "opt_learning_rate_warmup_epochs", "opt_learning_rate_decay_boundary_epochs", "opt_learning_rate_decay_factor",
    "opt_weight_decay", "opt_momentum", "oversampling", "training_input_shape", "validation_input_shape",
    "validation_overlap", "weights_initialization", "init_stop", "run_start", "train_samples", "eval_samples",
    "samples_per_epoch", "global_batch_size", "gradient_accumulation_steps",
]


@pytest.fixture(scope="module")
def tiny_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """8 synthetic KiTS19-like cases of about 16^3 (6 train, 2 eval), made by the dataset CLI."""
    out = tmp_path_factory.mktemp("unet3d") / "data"
    subprocess.run(
        [sys.executable, "-m", "workloads.unet3d.dataset", "synthesize", str(out), "--cases", "8",
         "--size", "16,16,16", "--min-shape", "16", "--seed", "0", "--workers", "1", "--eval-cases", "2"],
        cwd=PROJECT, check=True, capture_output=True,
    )
    return out


def read_log(path: Path) -> list[dict]:
    return [json.loads(line.split(":::MLLOG ", 1)[1]) for line in path.read_text().splitlines() if ":::MLLOG" in line]


def run_main(data: Path, results: Path, *extra: str, env: dict[str, str] | None = None) -> tuple[int, list[dict]]:
    old = dict(os.environ)
    os.environ.update(env or {})
    try:
        code = train.main(["--data-dir", str(data), "--results-dir", str(results), *TINY_ARGS, *extra])
    finally:
        os.environ.clear()
        os.environ.update(old)
    log = results / "unet3d.log"
    return code, read_log(log) if log.exists() else []


# --- pure pieces ---------------------------------------------------------------------------------

def _config(**kw) -> TrainConfig:
    return TrainConfig(data_dir=Path("."), results_dir=Path("."), **kw)


def test_learning_rate_warms_up_linearly_then_decays_per_boundary():
    config = _config(learning_rate=0.8, init_learning_rate=1e-4, lr_warmup_epochs=200,
                     lr_decay_epochs=(300, 400), lr_decay_factor=0.5)
    assert learning_rate(config, 1) == pytest.approx(1e-4 + (0.8 - 1e-4) / 200)
    assert learning_rate(config, 100) == pytest.approx(1e-4 + (0.8 - 1e-4) / 2)
    assert learning_rate(config, 200) == pytest.approx(0.8)
    assert learning_rate(config, 300) == pytest.approx(0.8)
    assert learning_rate(config, 301) == pytest.approx(0.4)
    assert learning_rate(config, 401) == pytest.approx(0.2)
    assert learning_rate(_config(lr_warmup_epochs=0), 1) == 0.8


@pytest.mark.parametrize(
    "batch, world, expected",
    [(2, 1, (168, 1000, 20, 10000)), (7, 1, (168, 1000, 20, 10000)), (5, 1, (165, 1019, 21, 10182)),
     (2, 4, (168, 1000, 20, 10000)), (32, 1, (160, 1050, 21, 10500))],
)
def test_eval_schedule_scales_with_samples_per_epoch(batch, world, expected):
    s = resolve_schedule(_config(batch_size=batch), 168, world)
    assert (s.samples_per_epoch, s.start_eval_at, s.evaluate_every, s.max_epochs) == expected


def test_schedule_evaluates_from_start_every_interval():
    s = resolve_schedule(_config(start_eval_at=3, evaluate_every=2, max_epochs=9), 10, 1)
    assert [e for e in range(1, 10) if s.is_eval_epoch(e)] == [3, 5, 7, 9]


def test_config_rejects_a_patch_the_model_cannot_halve():
    with pytest.raises(ValueError, match="multiple of 32"):
        _config(input_shape=(48, 48, 48))
    with pytest.raises(ValueError, match="too small"):
        _config(model=UNet3DConfig(filters=(4, 8)), input_shape=(4, 4, 4))


def test_sampler_shards_one_shared_permutation_and_drops_the_last_batch():
    shards = [list(ShardedShuffleSampler(11, 4, rank, 2, master_seed=5)) for rank in range(2)]
    cases = [case for shard in shards for case, _ in shard]
    assert all(len(shard) == 4 for shard in shards)  # 11 // 4 * 4 = 8 samples, 4 per rank
    assert len(set(cases)) == 8  # disjoint
    again = ShardedShuffleSampler(11, 4, 0, 2, master_seed=5)
    assert list(again) == shards[0]  # deterministic
    again.set_epoch(2)
    assert list(again) != shards[0]  # a new order per epoch


def _blob_label() -> np.ndarray:
    label = np.zeros((1, 40, 40, 40), dtype=np.uint8)
    label[0, 2:6, 2:6, 2:6] = 1  # small kidney component
    label[0, 20:30, 25:35, 10:14] = 1  # large kidney component
    label[0, 30:33, 5:8, 30:36] = 1  # middle one
    label[0, 22:25, 27:30, 11:13] = 2  # tumour inside the large one
    return label


def test_largest_component_boxes_keeps_the_two_biggest_boxes():
    boxes = largest_component_boxes(_blob_label(), 1)
    sizes = sorted(int(np.prod([s.stop - s.start for s in b])) for b in boxes)
    assert sizes == [4 * 4 * 4, 10 * 10 * 4]  # the 3 x 3 x 6 one (54) is dropped


def test_foreground_crop_always_holds_foreground_and_has_the_patch_size():
    label = _blob_label()
    image = np.random.default_rng(0).standard_normal(label.shape).astype(np.float32)
    crop = BalancedCrop(patch=(16, 16, 16), oversampling=1.0)
    for seed in range(30):
        x, y = augment(image, label, crop, np.random.default_rng(seed))
        assert x.shape == y.shape == (1, 16, 16, 16) and x.dtype == np.float32 and y.dtype == np.uint8
        assert (y > 0).any()


def test_uniform_crop_stays_inside_the_volume():
    crop = BalancedCrop(patch=(16, 16, 16), oversampling=0.0)
    for seed in range(20):
        box = crop.box(_blob_label(), np.random.default_rng(seed))
        assert all(s.start >= 0 and s.stop <= 40 and s.stop - s.start == 16 for s in box)


def test_flips_move_image_and_label_together():
    image = np.arange(8, dtype=np.float32).reshape(1, 2, 2, 2)
    for seed in range(10):
        x, y = flip(image, image.astype(np.uint8), np.random.default_rng(seed))
        assert np.array_equal(x.astype(np.uint8), y)
    flipped = {flip(image, image, np.random.default_rng(s))[0].tobytes() for s in range(40)}
    assert len(flipped) > 1


# --- whole runs ----------------------------------------------------------------------------------

def test_run_logs_every_key_in_order_and_stops_at_the_epoch_cap(tiny_data, tmp_path):
    code, log = run_main(tiny_data, tmp_path, "--max-epochs", "2", "--quality-threshold", "1.0", "--seed", "3",
                         env={"MLTRAIN_PROFILE": "smoke"})
    assert code == 0
    keys = [e["key"] for e in log]
    assert keys[: len(PREAMBLE)] == PREAMBLE
    epoch = ["block_start", "epoch_start", "epoch_stop", "eval_start", "eval_accuracy", "eval_stop", "block_stop"]
    rest = keys[len(PREAMBLE):]
    assert rest[-1] == "run_stop" and log[-1]["metadata"]["status"] == "aborted"
    stopped_early = rest[:-1] == epoch  # diverged (Dice < 1e-6) after the first evaluation
    assert stopped_early or rest[:-1] == epoch * 2
    values = {e["key"]: e["value"] for e in log}
    assert values["seed"] == 3 and values["submission_division"] == "open"
    assert values["train_samples"] == 6 and values["eval_samples"] == 2
    assert values["samples_per_epoch"] == 6 and values["global_batch_size"] == 2
    assert values["training_input_shape"] == [16, 16, 16]
    assert all("epoch_num" in e["metadata"] for e in log if e["key"] == "eval_accuracy")
    settings = values["resolved_settings"]
    assert settings["device"] == "cpu" and settings["threads"] == 1 and settings["requested_precision"] == "auto"
    assert settings["precision"] in ("fp32", "bf16") and settings["why"]
    assert settings["cpus"] >= 1 and settings["num_workers"] == 0 and settings["workers_why"].startswith("0 on a CPU")
    assert values["submission_platform"] == settings["device_name"]


def test_reaching_the_target_stops_with_success(tiny_data, tmp_path):
    code, log = run_main(tiny_data, tmp_path, "--max-epochs", "3", "--seed", "1",
                         env={"QUALITY_THRESHOLD": "1e-12"})
    assert code == 0
    assert [e["key"] for e in log].count("eval_accuracy") == 1
    assert log[-1]["key"] == "run_stop" and log[-1]["metadata"]["status"] == "success"
    division = next(e for e in log if e["key"] == "submission_division")
    assert division["value"] == "open"  # a shrunk model, a tiny dataset and a fixed seed: never closed
    reason = division["metadata"]["reason"]
    assert "FILTERS 4,8 differ" in reason and "seed fixed by the caller" in reason and "8 cases" in reason
    # the trained weights, written after run_stop (what `mltrain export RUN --model` exports)
    facts = json.loads((tmp_path / "model.json").read_text())
    assert facts["filters"] == [4, 8] and facts["status"] == "success" and (tmp_path / "model.pt").stat().st_size > 0
    assert (tmp_path / "model.pt").stat().st_mtime >= (tmp_path / "unet3d.log").stat().st_mtime - 1


def test_save_model_0_writes_no_weights(tiny_data, tmp_path):
    code, _ = run_main(tiny_data, tmp_path, "--max-epochs", "1", "--seed", "1", "--quality-threshold", "1e-12",
                       env={"SAVE_MODEL": "0"})
    assert code == 0 and not (tmp_path / "model.pt").exists() and (tmp_path / "unet3d.log").exists()


EPOCH_EVENTS = ("epoch_start", "epoch_stop", "eval_start", "eval_accuracy", "eval_stop")


def test_epoch_numbers_count_samples_as_the_v4_rcps_do(tiny_data, tmp_path):
    """epoch_num, first_epoch_num and epoch_count are samples (epoch x samples_per_epoch, as the
    reference's mlcommons/training#684 logs them); the orchestrator reads them back as epochs."""
    from orchestrator.mlperf.mllog import build_record, parse_file
    from orchestrator.mlperf.quality import Goal

    code, log = run_main(tiny_data, tmp_path, "--max-epochs", "2", "--start-eval-at", "2", "--seed", "1",
                         env={"QUALITY_THRESHOLD": "1e-12"})
    assert code == 0 and log[-1]["metadata"]["status"] == "success"
    per_epoch = {e["key"]: e["value"] for e in log}["samples_per_epoch"]
    assert per_epoch == 6
    blocks = [e["metadata"] for e in log if e["key"] == "block_start"]
    assert blocks == [{**blocks[0], "first_epoch_num": 6, "epoch_count": 6},
                      {**blocks[1], "first_epoch_num": 12, "epoch_count": 6}]
    assert [e["metadata"]["epoch_num"] for e in log if e["key"] in EPOCH_EVENTS] == \
        [6, 6, 12, 12, 12, 12, 12]
    assert next(e for e in log if e["key"] == "eval_start")["value"] == 12
    record = build_record(parse_file(tmp_path / "unet3d.log"), goal=Goal(target=1e-12))
    assert record.epochs_to_target == 2 and record.epochs_run == 2 and record.metadata["epoch_unit"] == "samples"


def test_same_seed_same_run_and_bf16_channels_last_run(tiny_data, tmp_path):
    def accuracies(folder: str, *extra: str) -> list[float]:
        code, log = run_main(tiny_data, tmp_path / folder, "--max-epochs", "2", "--start-eval-at", "2",
                             "--quality-threshold", "1.0", "--seed", "7", *extra)
        assert code == 0
        return [e["value"] for e in log if e["key"] == "eval_accuracy"]

    first = accuracies("a")
    assert first == accuracies("b")
    fast = accuracies("c", "--amp", "bf16", "--channels-last")
    assert len(fast) == 1 and 0.0 <= fast[0] <= 1.0


def test_random_seed_is_drawn_and_logged(tiny_data, tmp_path):
    code, log = run_main(tiny_data, tmp_path, "--max-epochs", "1", "--seed", "-1", "--quality-threshold", "1e-12")
    assert code == 0
    seed = {e["key"]: e["value"] for e in log}["seed"]
    assert isinstance(seed, int) and seed >= 0


def test_bad_data_gives_one_line_and_exit_2(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    code, _ = run_main(tmp_path / "empty", tmp_path / "r", "--max-epochs", "1")
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "no case_XXXXX_x.npy" in err
    code, _ = run_main(tmp_path / "absent", tmp_path / "r", "--max-epochs", "1")
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "no such dataset folder" in err


def test_missing_label_is_named(tiny_data, tmp_path, capsys):
    data = tmp_path / "data"
    data.mkdir()
    for f in tiny_data.iterdir():
        if f.name != "case_00000_y.npy":
            (data / f.name).symlink_to(f)
    code, _ = run_main(data, tmp_path / "r", "--max-epochs", "1")
    err = capsys.readouterr().err
    assert code == 2 and "case_00000" in err and len(err.strip().splitlines()) == 1


def test_bad_arguments_give_one_line_and_exit_2(tiny_data, tmp_path, capsys):
    code, _ = run_main(tiny_data, tmp_path, "--input-shape", "14")
    err = capsys.readouterr().err
    assert code == 2 and "multiple of 4" in err and "Traceback" not in err


def _run_and_time(tiny_data: Path, results: Path, extra_env: dict[str, str]) -> subprocess.CompletedProcess:
    env = dict(os.environ, DATADIR=str(tiny_data), RESULTS_DIR=str(results), FILTERS="4,8", INPUT_SHAPE="16",
               LEARNING_RATE="0.5", LR_WARMUP_EPOCHS="1", MAX_EPOCHS="2", START_EVAL_AT="2", EVALUATE_EVERY="1",
               QUALITY_THRESHOLD="1e-12", MLTRAIN_PROFILE="smoke", PYTHON=sys.executable, **extra_env)
    script = PROJECT / "workloads" / "unet3d" / "run_and_time.sh"
    return subprocess.run(["bash", str(script), "5"], cwd=results.parent, env=env, capture_output=True, text=True,
                          timeout=300)


def test_run_and_time_prints_mllog_and_the_result_line(tiny_data, tmp_path):
    done = _run_and_time(tiny_data, tmp_path / "r", {"THREADS": "1"})
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert any(line.startswith(":::MLLOG ") and '"key": "run_stop"' in line for line in lines)
    result = [line for line in lines if line.startswith("RESULT,")]
    assert len(result) == 1 and result[0].split(",")[1:3] == ["image_segmentation", "5"]
    assert (tmp_path / "r" / "unet3d.log").exists()


def test_torchrun_two_processes_on_gloo(tiny_data, tmp_path):
    done = _run_and_time(tiny_data, tmp_path / "r", {"NPROC": "2", "BATCH_SIZE": "1"})
    assert done.returncode == 0, done.stderr[:3000] + "\n...\n" + done.stderr[-1000:]  # the rank's own error first
    assert OUTLIVING_DDP not in done.stderr  # the ranks left the group with no DDP model holding it
    log = read_log(tmp_path / "r" / "unet3d.log")
    keys = [e["key"] for e in log]
    assert keys.count("seed") == 1 and keys.count("run_start") == 1  # rank 0 logs alone
    values = {e["key"]: e["value"] for e in log}
    assert values["global_batch_size"] == 2 and values["samples_per_epoch"] == 6
    assert log[-1]["key"] == "run_stop" and log[-1]["metadata"]["status"] == "success"
    assert done.stdout.count('"key": "run_stop"') == 1


@pytest.mark.slow
def test_smoke_profile_of_seeds_yaml_converges(tmp_path):
    """The smoke profile as the orchestrator runs it: its synthetic data, its env, one seed, to its target."""
    smoke = yaml.safe_load((PROJECT / "seeds.yaml").read_text())["workloads"]["unet3d"]["smoke"]
    data = tmp_path / "data"
    subprocess.run([sys.executable, "-m", "workloads.unet3d.dataset", "synthesize", str(data),
                    *smoke["dataset"]["args"]], cwd=PROJECT, check=True, capture_output=True)
    env = dict(os.environ, DATADIR=str(data), RESULTS_DIR=str(tmp_path / "r"), MLTRAIN_PROFILE="smoke",
               QUALITY_THRESHOLD=str(smoke["target"]), PYTHON=sys.executable, **smoke["env"])
    done = subprocess.run(["bash", str(PROJECT / "workloads" / "unet3d" / "run_and_time.sh"), "4"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=60 * smoke["timeout_minutes"])
    assert done.returncode == 0, done.stderr[-2000:]
    log = read_log(tmp_path / "r" / "unet3d.log")
    assert log[-1]["metadata"]["status"] == "success"
    assert max(e["value"] for e in log if e["key"] == "eval_accuracy") >= smoke["target"]
