"""The CUDA paths on a real GPU (run by benchmarks/gpu_session.sh; skipped without CUDA)."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest
import torch
from PIL import Image
from torch import nn

from workloads.common import distributed
from workloads.common.distributed import Context
from workloads.resnet50 import engine
from workloads.resnet50.config import with_overrides
from workloads.resnet50.data_loader import (
    DeviceBatch,
    EvalTransform,
    ImageFolder,
    ShardSampler,
    make_loader,
)
from workloads.resnet50.engine import Precision, train_epoch
from workloads.resnet50.gpu_decode import EvalAugment, pil_decode, torchvision_decoder
from workloads.resnet50.layout import list_dataset
from workloads.resnet50.model import ModelConfig, ResNet50
from workloads.resnet50.optim import Schedule, build_optimizer
from workloads.resnet50.runtime import resolve_setup
from workloads.resnet50.train import train

from .conftest import tiny_config

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]
GPU = torch.device("cuda", 0)


def test_auto_precision_follows_the_gpu_generation():
    setup = resolve_setup(tiny_config(), Context(device=GPU))
    major, minor = torch.cuda.get_device_capability(GPU)
    assert setup.settings["capability"] == f"{major}.{minor}" and setup.settings["device"] == "cuda"
    assert setup.precision.dtype == ("bf16" if major >= 8 else "fp16")
    assert torch.backends.cudnn.benchmark


@pytest.mark.parametrize(("optimizer_name", "dtype"), [("lars", "bf16"), ("lars", "fp16"), ("sgd", "bf16"),
                                                        ("lars", "fp32")])
def test_training_steps_never_wait_for_the_gpu(monkeypatch, optimizer_name, dtype):
    if dtype == "bf16" and not torch.cuda.is_bf16_supported():
        pytest.skip("no native bf16")
    torch.manual_seed(0)
    model = ResNet50(ModelConfig(num_classes=10, width=16, layers=(1, 1, 1, 1))).to(GPU)
    model = model.to(memory_format=torch.channels_last)
    optimizer = build_optimizer(optimizer_name, model, lr=0.1, momentum=0.9, weight_decay=5e-5, lars_eta=0.001,
                                lars_epsilon=0.0)
    precision = Precision(dtype=dtype, channels_last=True)
    scaler = precision.scaler(GPU)
    images = torch.randn(8, 3, 64, 64, device=GPU).contiguous(memory_format=torch.channels_last)
    batches = [DeviceBatch(images, torch.randint(0, 10, (8,), device=GPU), 8, 0) for _ in range(6)]
    schedule = Schedule(base_lr=0.1, end_lr=0.0001, warmup_steps=1, decay_steps=10)
    ctx = Context(device=GPU)
    train_epoch(model, batches[:1], optimizer, nn.CrossEntropyLoss(), schedule, 0, precision, scaler, ctx)  # warm

    real_check = distributed.any_rank  # the only place the step loop waits for the GPU
    checks: list[int] = []

    def allowed(flags, context):
        checks.append(1)
        torch.cuda.set_sync_debug_mode("default")
        try:
            return real_check(flags, context)
        finally:
            torch.cuda.set_sync_debug_mode("error")

    monkeypatch.setattr(engine.distributed, "any_rank", allowed)
    torch.cuda.set_sync_debug_mode("error")
    try:
        stats = train_epoch(model, batches, optimizer, nn.CrossEntropyLoss(label_smoothing=0.1), schedule, 1,
                            precision, scaler, ctx, finite_check_steps=100)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert (stats.steps, stats.diverged, len(checks)) == (6, False, 1)
    assert stats.mean_loss > 0


def test_loader_batches_arrive_pinned(tiny_dataset: Path):
    train_split, _ = list_dataset(tiny_dataset)
    sampler = ShardSampler(16, rank=0, world=1, shuffle=False, seed=0, batch_size=8, drop_last=True)
    loader = make_loader(ImageFolder(train_split.samples[:16], EvalTransform(resize=18, crop=16)), sampler,
                         batch_size=8, workers=1, seed=0, pin_memory=True)
    batch = next(iter(loader))
    assert batch.images.is_pinned() and batch.labels.is_pinned()


def _reencoded(path: Path, subsampling: int) -> torch.Tensor:
    """The file's picture as JPEG bytes with the given chroma subsampling (PIL: 0 is 4:4:4, 2 is 4:2:0)."""
    buffer = io.BytesIO()
    with Image.open(path) as image:
        image.convert("RGB").save(buffer, format="JPEG", quality=95, subsampling=subsampling)
    return torch.frombuffer(bytearray(buffer.getvalue()), dtype=torch.uint8)


def test_nvjpeg_decode_and_device_resize_match_the_pil_path(tiny_dataset: Path):
    """Without chroma subsampling nvJPEG and PIL agree to rounding. With 4:2:0 (PIL's default, most of
    ImageNet) they differ in colour only: nvJPEG upsamples chroma nearest-neighbour, PIL interpolates;
    seen on an H100 (torchvision 0.26): mean |difference| 14.8 on these 20-pixel noisy pictures."""
    decoder = torchvision_decoder()
    if decoder is None:
        pytest.skip("torchvision not importable")
    _, val = list_dataset(tiny_dataset)
    full = [_reencoded(path, subsampling=0) for path, _ in val.samples[:8]]
    on_gpu = decoder(full, GPU)
    assert all(image.device.type == "cuda" and image.dtype == torch.uint8 for image in on_gpu)
    on_host = [pil_decode(item) for item in full]
    for gpu_image, host_image in zip(on_gpu, on_host, strict=True):
        assert gpu_image.shape == host_image.shape
        assert float((gpu_image.cpu().float() - host_image.float()).abs().mean()) < 3.0
    augment = EvalAugment(resize=18, crop=16)
    from_gpu = augment(on_gpu, torch.Generator()).cpu()
    from_host = augment(on_host, torch.Generator())
    assert float((from_gpu - from_host).abs().mean()) < 3.0
    # 4:2:0: the same brightness (the mean over channels weighs chroma errors of opposite sign out
    # only roughly, so the bound is loose), the same shape
    halved = [_reencoded(path, subsampling=2) for path, _ in val.samples[:8]]
    for gpu_image, host_image in zip(decoder(halved, GPU), [pil_decode(item) for item in halved], strict=True):
        assert gpu_image.shape == host_image.shape
        assert abs(float(gpu_image.float().mean()) - float(host_image.float().mean())) < 8.0


@pytest.mark.parametrize("decode", ["auto", "pil"])
def test_a_tiny_run_trains_on_the_gpu_and_logs_what_ran(tiny_dataset: Path, tmp_path: Path, decode: str):
    config = with_overrides(tiny_config(), ["device=cuda", f"decode={decode}", "crop=32", "eval_resize=36",
                                            "max_epochs=3", "target=0.99"])
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        status = train(config, data_dir=tiny_dataset, results_dir=tmp_path, seed=1, context=Context(device=GPU))
    log = [json.loads(line.split(":::MLLOG ", 1)[1]) for line in out.getvalue().splitlines()
           if line.startswith(":::MLLOG ")]
    settings = next(e for e in log if e["key"] == "resolved_settings")["value"]
    assert settings["device"] == "cuda" and settings["device_name"] == torch.cuda.get_device_name(GPU)
    expected_decode = "pil" if decode == "pil" or torchvision_decoder() is None else "torchvision"
    assert settings["decode"] == expected_decode
    assert status in ("success", "aborted") and log[-1]["key"] == "run_stop"
    accuracies = [e["value"] for e in log if e["key"] == "eval_accuracy"]
    assert len(accuracies) == 3 and accuracies[-1] > 0.25  # 4 classes: better than chance after 3 epochs
