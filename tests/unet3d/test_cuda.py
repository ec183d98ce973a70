"""The CUDA paths on a real GPU: no host sync in the step, evaluation and augmentation on the GPU equal
to the CPU's, the compiled warm-up, the throughput mode. Skipped without CUDA (run by
benchmarks/gpu_session.sh on a GPU node)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from workloads.common import distributed
from workloads.common.distributed import Context
from workloads.unet3d import device_augment
from workloads.unet3d.augment import NOISE_STD_COLUMN, BalancedCrop, crop_patch, draw_params
from workloads.unet3d.config import TrainConfig
from workloads.unet3d.evaluate import evaluate_case, sliding_window_logits
from workloads.unet3d.model import UNet3D, UNet3DConfig
from workloads.unet3d.precision import autocast
from workloads.unet3d.settings import resolve_settings
from workloads.unet3d.step import build_trainer, random_batch, to_device, train_step, warm_up

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

PROJECT = Path(__file__).resolve().parents[2]
CUDA = torch.device("cuda", 0)
TINY = UNet3DConfig(filters=(4, 8, 16))


def _config(**kw) -> TrainConfig:
    values = dict(data_dir=Path("."), results_dir=Path("."), model=TINY, input_shape=(32, 32, 32),
                  val_input_shape=(32, 32, 32), learning_rate=0.1, lr_warmup_epochs=0)
    values.update(kw)
    return TrainConfig(**values)


def _settings(precision: str = "auto", compile_model: bool = False, channels_last: bool | None = None):
    return resolve_settings(device=CUDA, requested_precision=precision, threads=None, nproc=1,
                            channels_last=channels_last, compile_model=compile_model, num_workers=None,
                            eval_batch=None)


def test_auto_picks_the_gpus_native_precision():
    major, _ = torch.cuda.get_device_capability(CUDA)
    settings = _settings()
    assert settings.precision == ("bf16" if major >= 8 else "fp16" if major >= 7 else "fp32")
    assert settings.device_name == torch.cuda.get_device_name(CUDA) and settings.pin_memory


def test_init_on_one_gpu_selects_it():
    ctx = distributed.init("cuda", {})
    assert ctx.device == CUDA and torch.cuda.current_device() == 0 and not ctx.is_distributed


@pytest.mark.parametrize("precision", ["auto", "fp16", "fp32"])
@pytest.mark.parametrize("channels_last", [False, True])
def test_a_training_step_never_waits_for_the_gpu(precision, channels_last):
    settings = _settings(precision, channels_last=channels_last)
    trainer = build_trainer(_config(precision=precision), settings, Context(device=CUDA))
    image, label, params = random_batch(2, (32, 32, 32), CUDA)
    params[0, :3] = 1.0  # flips
    params[1, NOISE_STD_COLUMN:] = torch.tensor([0.05, 3.0], dtype=torch.float64)  # noise
    batches = [(image.clone().pin_memory(), label.clone().pin_memory(), params) for _ in range(4)]
    train_step(trainer, *to_device(batches[0], settings))
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")  # any synchronising call in the step raises
    try:
        for batch in batches[1:]:
            loss = train_step(trainer, *to_device(batch, settings))
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert bool(torch.isfinite(loss)) and trainer.optimizer.param_groups[0].get("fused")
    assert trainer.scaler.is_enabled() == (settings.precision == "fp16")


def test_evaluation_on_the_gpu_equals_the_cpu():
    torch.backends.cudnn.allow_tf32 = False
    try:
        torch.manual_seed(0)
        cpu_model = UNet3D(TINY).eval()
        gpu_model = UNet3D(TINY).to(CUDA).eval()
        gpu_model.load_state_dict(cpu_model.state_dict())
        label = np.zeros((1, 70, 66, 80), dtype=np.uint8)
        label[0, 10:40, 12:50, 20:60] = 1
        label[0, 20:30, 20:30, 30:40] = 2
        image = np.random.default_rng(0).standard_normal(label.shape).astype(np.float32) + label
        with torch.inference_mode():
            on_cpu = evaluate_case(cpu_model, image, label, (32, 32, 32), 0.5)
            one = evaluate_case(gpu_model, image, label, (32, 32, 32), 0.5, batch=1)
            four = evaluate_case(gpu_model, torch.from_numpy(image).pin_memory(), torch.from_numpy(label).pin_memory(),
                                 (32, 32, 32), 0.5, device=CUDA, batch=4)
        assert one.device == CUDA and four.device == CUDA
        assert torch.allclose(one.cpu(), on_cpu, atol=1e-4) and torch.allclose(four.cpu(), on_cpu, atol=1e-4)
    finally:
        torch.backends.cudnn.allow_tf32 = True


def test_evaluation_in_reduced_precision_stays_close():
    torch.manual_seed(0)
    model = UNet3D(TINY).to(CUDA).eval()
    image = torch.randn(1, 1, 64, 64, 80, device=CUDA)
    settings = _settings()
    with torch.inference_mode():
        exact = sliding_window_logits(model, image, (32, 32, 32), 0.5, batch=4)
        with autocast(settings.precision, CUDA):
            fast = sliding_window_logits(model, image, (32, 32, 32), 0.5, batch=4)
    assert fast.dtype == torch.float32 and fast.device == CUDA  # blended in fp32 whatever the model ran in
    assert float((fast - exact).abs().max()) < 0.05 * float(exact.abs().max())


def test_device_augmentation_on_the_gpu_equals_the_cpu():
    rng = np.random.default_rng(0)
    image = rng.standard_normal((1, 40, 40, 40)).astype(np.float32)
    label = (rng.random((1, 40, 40, 40)) > 0.9).astype(np.uint8)
    crop = BalancedCrop(patch=(32, 32, 32), oversampling=0.4)
    compared = 0
    for seed in range(60):
        sample_rng = np.random.default_rng(seed)
        x, y = crop_patch(image, label, crop, sample_rng)
        params = torch.from_numpy(draw_params(sample_rng))[None]
        cpu_x, cpu_y = device_augment.apply(torch.from_numpy(x)[None].clone(), torch.from_numpy(y)[None].clone(),
                                            params)
        gpu_x, gpu_y = device_augment.apply(torch.from_numpy(x)[None].to(CUDA), torch.from_numpy(y)[None].to(CUDA),
                                            params)
        assert torch.equal(gpu_y.cpu(), cpu_y)
        if params[0, NOISE_STD_COLUMN] == 0:
            assert torch.equal(gpu_x.cpu(), cpu_x)
            compared += 1
        else:  # each device draws its own noise: each must be standard normal times the drawn std
            quiet = params.clone()
            quiet[0, NOISE_STD_COLUMN] = 0.0
            clean, _ = device_augment.apply(torch.from_numpy(x)[None].clone(), torch.from_numpy(y)[None].clone(), quiet)
            for noisy in (cpu_x, gpu_x.cpu()):
                noise = (noisy - clean) / params[0, NOISE_STD_COLUMN]
                assert abs(float(noise.mean())) < 0.05 and abs(float(noise.std()) - 1.0) < 0.05
    assert compared > 40


def test_compiled_warm_up_restores_the_weights_and_trains():
    settings = _settings(compile_model=True)
    assert settings.channels_last
    config = _config()
    torch.manual_seed(0)
    trainer = build_trainer(config, settings, Context(device=CUDA))
    before = {k: v.clone() for k, v in trainer.base.state_dict().items()}
    warm_up(trainer, config, steps=2)
    assert all(torch.equal(before[k], v) for k, v in trainer.base.state_dict().items())
    loss = train_step(trainer, *to_device(random_batch(2, (32, 32, 32), CUDA), settings))
    assert bool(torch.isfinite(loss))


def test_throughput_mode_on_the_gpu():
    env = {**os.environ, "PYTHON": sys.executable, "FILTERS": "8,16,32", "INPUT_SHAPE": "64", "STEPS": "5",
           "WARMUP_STEPS": "2", "NPROC": "1"}
    done = subprocess.run(["bash", "throughput.sh"], cwd=PROJECT / "workloads" / "unet3d", env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    final = json.loads(done.stdout.strip().splitlines()[-1].split(":::MLLOG ", 1)[1])
    assert final["key"] == "throughput" and final["value"] > 0
    assert final["metadata"]["device_name"] == torch.cuda.get_device_name(CUDA)
