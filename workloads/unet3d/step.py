"""The training step of the closed recipe, and everything it needs, built to run fast on a GPU.

Every knob the rules fix stays as the reference has it: the model, Dice+CE loss, SGD with
Nesterov momentum, the learning-rate schedule, batch, patch and oversampling. What changes is
how the step runs:

- the batch arrives in pinned memory and is copied without blocking; flips, brightness and noise
  are applied on the device (``device_augment``);
- ``cudnn.benchmark`` on CUDA (``cudnn_benchmark``); channels_last_3d where it pays (with compile:
  see settings.py); the loss from one log-softmax pass when ``fused_loss`` says so;
- autocast in the resolved precision; fp16 comes with a GradScaler, whose step the fused SGD
  takes without a host synchronisation (``grad_scale``/``found_inf`` stay on the device); its
  momentum buffers start at zero (``workloads.common.sgd``), so a first step the scaler skips, here
  or after ``warm_up`` emptied the state again, leaves no uninitialised memory behind;
- ``torch.compile`` (opt-in, in the settings' ``compile_mode``) of the DDP-wrapped model, so
  DDP's bucketed all-reduce keeps overlapping the backward pass; compilation and cuDNN's
  autotuning happen in ``warm_up``, before run_start, on random tensors, and the weights and
  optimizer state are restored after;
- nothing reads the loss on the host: no ``.item()`` per step.

CUDA graphs only through torch.compile's ``reduce-overhead`` mode (opt-in): one step of the
31M-parameter model on a 2x128^3 batch runs for tens of milliseconds of GPU time, so launch
overhead is a few percent at most; the GPU session's benchmark measures the mode beside the others.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch import nn

from workloads.common.distributed import Context, wrap
from workloads.common.sgd import ZeroMomentumSGD
from workloads.common.timing import synchronize
from workloads.unet3d import device_augment
from workloads.unet3d.augment import N_PARAMS, SCALE_COLUMN
from workloads.unet3d.config import TrainConfig, learning_rate
from workloads.unet3d.losses import DiceCELoss, FusedDiceCELoss
from workloads.unet3d.model import UNet3D
from workloads.unet3d.precision import autocast
from workloads.unet3d.settings import RunSettings

WARMUP_STEPS = 3


@dataclass
class Trainer:
    """The model in its three guises, its optimizer and loss, and the settings they run with."""

    base: UNet3D
    """The module holding the weights."""
    ddp: nn.Module
    """``base`` wrapped by DistributedDataParallel (``base`` itself for one process)."""
    model: nn.Module
    """What the step calls: ``ddp``, compiled when the settings say so."""
    eval_model: nn.Module
    """What evaluation calls: ``base``, compiled when the settings say so."""
    optimizer: torch.optim.Optimizer
    scaler: torch.amp.GradScaler
    loss_fn: nn.Module
    settings: RunSettings
    ga_steps: int = 1
    """Micro-batches per optimizer step."""


def build_trainer(config: TrainConfig, settings: RunSettings, ctx: Context) -> Trainer:
    """Model (on the device, in its memory format), DDP, compile, SGD + Nesterov, GradScaler."""
    cuda = ctx.device.type == "cuda"
    if cuda:
        torch.backends.cudnn.benchmark = settings.cudnn_benchmark
    base = UNet3D(config.model).to(ctx.device, memory_format=settings.memory_format)
    ddp = wrap(base, ctx)
    optimizer = ZeroMomentumSGD(
        base.parameters(),
        lr=learning_rate(config, 1),
        momentum=config.momentum,
        nesterov=True,
        weight_decay=config.weight_decay,
        fused=True if cuda else None,
    )
    return Trainer(
        base=base,
        ddp=ddp,
        model=torch.compile(ddp, mode=settings.compile_mode) if settings.compile else ddp,
        eval_model=torch.compile(base, mode=settings.compile_mode) if settings.compile else base,
        optimizer=optimizer,
        scaler=torch.amp.GradScaler(ctx.device.type, enabled=settings.grad_scaler),
        loss_fn=FusedDiceCELoss() if settings.fused_loss else DiceCELoss(),
        settings=settings,
        ga_steps=config.ga_steps,
    )


def to_device(
    batch: tuple[torch.Tensor, torch.Tensor, torch.Tensor], settings: RunSettings
) -> tuple[torch.Tensor, torch.Tensor]:
    """A loader batch (image, label, params) on the model's device, augmented, in its memory format."""
    image, label, params = batch
    image = image.to(settings.device, non_blocking=True)  # (B, 1, D, H, W) float32
    label = label.to(settings.device, non_blocking=True)  # (B, 1, D, H, W) uint8
    image, label = device_augment.apply(image, label, params)
    return image.contiguous(memory_format=settings.memory_format), label


def train_step(trainer: Trainer, image: torch.Tensor, label: torch.Tensor, update: bool = True) -> torch.Tensor:
    """Forward and backward of one micro-batch; with ``update``, the optimizer step. Returns the loss
    as a device tensor (reading it would wait for the device: the loop does not)."""
    skip_sync = not update and isinstance(trainer.ddp, nn.parallel.DistributedDataParallel)
    accumulate = trainer.ddp.no_sync() if skip_sync else contextlib.nullcontext()
    with accumulate:
        with autocast(trainer.settings.precision, trainer.settings.device):
            loss = trainer.loss_fn(trainer.model(image), label) / trainer.ga_steps
        trainer.scaler.scale(loss).backward()
    if update:
        trainer.scaler.step(trainer.optimizer)
        trainer.scaler.update()
        trainer.optimizer.zero_grad(set_to_none=True)
    return loss.detach()


def random_batch(
    batch_size: int, shape: tuple[int, int, int], device: torch.device, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A loader-shaped batch of random data (CPU tensors): image (B, 1, *shape), label (B, 1, *shape)
    with classes 0..2, params (B, N_PARAMS) that flip nothing and add no noise."""
    generator = torch.Generator().manual_seed(seed)
    image = torch.randn((batch_size, 1, *shape), generator=generator)
    label = torch.randint(0, 3, (batch_size, 1, *shape), generator=generator, dtype=torch.uint8)
    params = torch.zeros((batch_size, N_PARAMS), dtype=torch.float64)
    params[:, SCALE_COLUMN] = 1.0  # brightness unchanged
    if device.type == "cuda":
        image, label = image.pin_memory(), label.pin_memory()
    return image, label, params


@contextlib.contextmanager
def restored(trainer: Trainer) -> Iterator[None]:
    """Whatever steps run inside, the weights, the optimizer state and the loss scale are as before after it."""
    weights = copy.deepcopy(trainer.base.state_dict())
    optimizer_state = copy.deepcopy(trainer.optimizer.state_dict())
    scaler_state = copy.deepcopy(trainer.scaler.state_dict())
    try:
        yield
    finally:
        trainer.base.load_state_dict(weights)
        trainer.optimizer.load_state_dict(optimizer_state)
        trainer.scaler.load_state_dict(scaler_state)
        trainer.optimizer.zero_grad(set_to_none=True)


def warm_up(trainer: Trainer, config: TrainConfig, steps: int = WARMUP_STEPS) -> None:
    """Compile, autotune and build DDP's buckets on random tensors, then put the weights, the
    optimizer and the scaler back as they were: the run starts from the same state as without it.

    Does nothing on a CPU without compile (nothing to gain there)."""
    settings = trainer.settings
    if settings.device.type != "cuda" and not settings.compile:
        return
    batch = random_batch(config.batch_size, config.input_shape, settings.device)
    with restored(trainer):
        trainer.model.train()
        for _ in range(steps):
            train_step(trainer, *to_device(batch, settings))
        trainer.eval_model.eval()
        with torch.inference_mode(), autocast(settings.precision, settings.device):
            window = torch.randn((settings.eval_batch, 1, *config.val_input_shape), device=settings.device)
            trainer.eval_model(window.contiguous(memory_format=settings.memory_format))
    trainer.model.train()
    synchronize(settings.device)
