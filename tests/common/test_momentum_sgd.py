"""The SGD both workloads build, stepped by a GradScaler whose first step overflows (issue 18, item 2).

On a GPU both workloads take torch's fused SGD. Its first step fills the momentum buffers with
``torch.empty_like`` and the fused kernel returns early when the scaler found inf/NaN, so a skipped
first step (likely at the initial scale of 65536) leaves them as whatever memory the allocator held,
and every later step reads them. Here the CPU fused kernel takes the GPU's place (the same
``fused=True`` path: the groups are switched to it as ``SGD(fused=True)`` does on CUDA) and a dirty
allocator is forced: ``torch.empty_like`` hands back NaN-filled memory. After an overflowing first
step and a finite second one, the momentum buffers and weights must be exactly those of an unfused
SGD that took only the finite step.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from workloads.resnet50.optim import build_optimizer
from workloads.unet3d.config import TrainConfig
from workloads.unet3d.distributed import Context
from workloads.unet3d.model import UNet3DConfig
from workloads.unet3d.settings import RunSettings
from workloads.unet3d.step import build_trainer, restored

CPU = torch.device("cpu")
MOMENTUM, WEIGHT_DECAY, LR = 0.9, 5e-5, 0.1


def dirty_allocator(monkeypatch: pytest.MonkeyPatch) -> None:
    """``torch.empty_like`` returns NaN-filled memory, as a reused CUDA block may hold anything."""
    real = torch.empty_like

    def empty_like(tensor, *args, **kwargs):
        return real(tensor, *args, **kwargs).fill_(float("nan"))

    monkeypatch.setattr(torch, "empty_like", empty_like)


def as_on_a_gpu(optimizer: torch.optim.SGD) -> torch.optim.SGD:
    """Switch a CPU-built SGD to the fused kernel, as the constructor does for ``fused=True`` (on CUDA)."""
    for group in optimizer.param_groups:
        group["fused"], group["foreach"] = True, False
    optimizer._step_supports_amp_scaling = True
    return optimizer


def unet3d_sgd() -> tuple[torch.optim.SGD, list[nn.Parameter]]:
    config = TrainConfig(data_dir=Path("."), results_dir=Path("."), model=UNet3DConfig(filters=(2, 4)),
                         input_shape=(8, 8, 8), val_input_shape=(8, 8, 8), precision="fp16", learning_rate=LR,
                         weight_decay=WEIGHT_DECAY)
    settings = RunSettings(device=CPU, device_name="test", capability=None, requested_precision="fp16",
                           precision="fp16", threads=1, nproc=1, cpus=1, channels_last=False, compile=False,
                           num_workers=0, workers_why="test", eval_batch=1, why="test")
    trainer = build_trainer(config, settings, Context(device=CPU))
    with restored(trainer):  # what warm_up does: a step, then the optimizer state as before (empty)
        for param in trainer.base.parameters():
            param.grad = torch.ones_like(param)
        trainer.optimizer.step()
    assert not trainer.optimizer.state or not any(trainer.optimizer.state.values())
    return trainer.optimizer, list(trainer.base.parameters())


def resnet50_sgd() -> tuple[torch.optim.SGD, list[nn.Parameter]]:
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.Flatten(), nn.Linear(4 * 4 * 4, 3))
    optimizer = build_optimizer("sgd", model, lr=LR, momentum=MOMENTUM, weight_decay=WEIGHT_DECAY, lars_eta=0.001,
                                lars_epsilon=0.0)
    return optimizer, list(model.parameters())


def unfused_reference(optimizer: torch.optim.SGD, params: list[nn.Parameter]) -> tuple[torch.optim.SGD,
                                                                                         list[nn.Parameter]]:
    """Plain for-loop SGD over copies of ``params`` with ``optimizer``'s groups and hyperparameters."""
    copies = {id(p): nn.Parameter(p.detach().clone()) for p in params}
    groups = [{**{k: v for k, v in g.items() if k not in ("params", "fused", "foreach")},
               "params": [copies[id(p)] for p in g["params"]]} for g in optimizer.param_groups]
    return torch.optim.SGD(groups, foreach=False, fused=False), [copies[id(p)] for p in params]


@pytest.mark.parametrize("build", [unet3d_sgd, resnet50_sgd], ids=["unet3d", "resnet50"])
def test_a_skipped_first_fused_step_leaves_momentum_as_unfused_sgd_has_it(monkeypatch, build):
    optimizer, params = build()
    optimizer = as_on_a_gpu(optimizer)
    reference, reference_params = unfused_reference(optimizer, params)
    generator = torch.Generator().manual_seed(0)
    grads = [torch.randn(p.shape, generator=generator) for p in params]
    dirty_allocator(monkeypatch)
    scaler = torch.amp.GradScaler("cpu", init_scale=65536.0)
    scaler.scale(torch.ones(()))  # what scaling the loss does first: the scale comes to exist

    for param in params:  # step 1: the scaled gradients overflowed; the scaler skips the step
        param.grad = torch.full_like(param, float("inf"))
    scaler.step(optimizer)
    scaler.update()
    assert scaler.get_scale() == 32768.0
    for param, grad in zip(params, grads, strict=True):  # step 2: finite
        param.grad = grad * scaler.get_scale()
    scaler.step(optimizer)
    scaler.update()

    for param, grad in zip(reference_params, grads, strict=True):
        param.grad = grad.clone()
    reference.step()
    for param, expected_param in zip(params, reference_params, strict=True):
        buffer = optimizer.state[param]["momentum_buffer"]
        expected = reference.state[expected_param]["momentum_buffer"]
        assert torch.isfinite(buffer).all(), "momentum buffer holds the allocator's garbage"
        torch.testing.assert_close(buffer, expected, rtol=0, atol=0)
        torch.testing.assert_close(param.detach(), expected_param.detach(), rtol=0, atol=0)
