"""The environment's knobs (a profile's `env:`), which the run scripts pass through untouched:
workloads/unet3d/config.py reads them, and the command line given after them wins."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from workloads.unet3d.config import TrainConfig, default
from workloads.unet3d.knobs import KNOBS, THROUGHPUT_KNOBS, TRAIN_KNOBS, build_parser, config_from_args, env_argv

PATHS = ["--data-dir", "/data", "--results-dir", "/results"]


def test_unset_knobs_give_the_reference_defaults_written_once_in_trainconfig():
    config = config_from_args(PATHS, {})
    reference = TrainConfig(data_dir=Path("/data"), results_dir=Path("/results"))
    fields = [f.name for f in dataclasses.fields(TrainConfig) if f.name not in ("data_dir", "results_dir")]
    assert {n: getattr(config, n) for n in fields} == {n: getattr(reference, n) for n in fields}
    assert default("batch_size") == 2 and default("quality_threshold") == 0.908


def test_the_environment_sets_the_options_and_the_command_line_wins():
    env = {"FILTERS": "4,8", "INPUT_SHAPE": "16", "BATCH_SIZE": "3", "LR_DECAY_EPOCHS": "", "COMPILE": "1",
           "AMP": "bf16", "THREADS": "auto", "CHANNELS_LAST": "0", "MAX_EPOCHS": "7", "QUALITY_THRESHOLD": "0.5",
           "SUBMISSION_ORG": "lab"}
    config = config_from_args([*PATHS, "--batch-size", "5"], env)
    assert (config.model.filters, config.input_shape, config.val_input_shape) == ((4, 8), (16,) * 3, (16,) * 3)
    assert (config.batch_size, config.lr_decay_epochs, config.compile, config.precision) == (5, (), True, "bf16")
    assert (config.threads, config.channels_last, config.max_epochs) == (None, False, 7)
    assert (config.quality_threshold, config.submission_org) == (0.5, "lab")


@pytest.mark.parametrize("value", ["0", "", "yes"])
def test_compile_is_on_only_for_1(value: str):
    assert env_argv({"COMPILE": value}, ["COMPILE"]) == []
    assert env_argv({"COMPILE": "1"}, ["COMPILE"]) == ["--compile"]


def test_every_knob_names_an_option_of_its_parser():
    from workloads.unet3d.throughput import build_parser as throughput_parser

    train_options = {a for action in build_parser()._actions for a in action.option_strings}
    throughput_options = {a for action in throughput_parser()._actions for a in action.option_strings}
    assert {KNOBS[name] for name in TRAIN_KNOBS} <= train_options
    assert {KNOBS[name] for name in THROUGHPUT_KNOBS} <= throughput_options


def test_a_bad_knob_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as stop:
        config_from_args(PATHS, {"INPUT_SHAPE": "1,2"})
    assert stop.value.code == 2 and "--input-shape" in capsys.readouterr().err


def test_the_step_knobs_come_from_the_environment_and_reach_the_settings(monkeypatch):
    """Each way of running the step the GPU session measures is a knob of a profile's env, logged."""
    import torch

    from workloads.unet3d import precision as P
    from workloads.unet3d.settings import StepKnobs, resolve_settings

    env = {"COMPILE": "1", "COMPILE_MODE": "reduce-overhead", "CUDNN_BENCHMARK": "0", "FUSED_LOSS": "1",
           "PIN_MEMORY": "auto"}
    config = config_from_args(PATHS, env)
    assert config.step == StepKnobs(compile_mode="reduce-overhead", cudnn_benchmark=False, fused_loss=True)
    monkeypatch.setattr(P, "cuda_capability", lambda device: (9, 0))
    monkeypatch.setattr(P, "device_name", lambda device: "NVIDIA H100 80GB HBM3")
    settings = resolve_settings(device=torch.device("cuda", 0), requested_precision="auto", threads=None, nproc=1,
                                channels_last=None, compile_model=config.compile, num_workers=None, eval_batch=None,
                                cpus=16, knobs=config.step)
    value = settings.log_value()
    assert (value["compile_mode"], value["cudnn_benchmark"], value["fused_loss"], value["pin_memory"]) == \
        ("reduce-overhead", False, True, True)
    auto = resolve_settings(device=torch.device("cuda", 0), requested_precision="auto", threads=None, nproc=1,
                            channels_last=None, compile_model=False, num_workers=None, eval_batch=None, cpus=16)
    assert (auto.cudnn_benchmark, auto.fused_loss, auto.pin_memory, auto.log_value()["compile_mode"]) == \
        (True, False, True, None)
    on_cpu = resolve_settings(device=torch.device("cpu"), requested_precision="fp32", threads=1, nproc=1,
                              channels_last=None, compile_model=False, num_workers=None, eval_batch=None, cpus=2,
                              knobs=StepKnobs(cudnn_benchmark=True, pin_memory=True))
    assert not on_cpu.cudnn_benchmark and not on_cpu.pin_memory  # CUDA's alone


def test_an_unknown_compile_mode_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as stop:
        config_from_args(PATHS, {"COMPILE_MODE": "fastest"})
    assert stop.value.code == 2 and "--compile-mode" in capsys.readouterr().err


def test_the_smoke_recipe_outside_a_run_is_the_smoke_profiles():
    """The inference harness trains its 3d-unet smoke model with smoke_profile.SMOKE_*: seeds.yaml's smoke profile."""
    import yaml

    from orchestrator.config.locations import python_root
    from workloads.unet3d.smoke_profile import SMOKE_ENV, SMOKE_TARGET, smoke_data_args

    smoke = yaml.safe_load((python_root() / "seeds.yaml").read_text())["workloads"]["unet3d"]["smoke"]
    assert {name: smoke["env"][name] for name in SMOKE_ENV} == SMOKE_ENV
    assert smoke["target"] == SMOKE_TARGET and smoke["dataset"]["args"] == smoke_data_args()
