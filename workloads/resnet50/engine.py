"""One training epoch and one evaluation pass; what the loop in train.py repeats.

No step waits for the device or for the other ranks on the host: the loss is summed on the device
and read once per epoch; whether it stayed finite is checked every ``finite_check_steps`` steps
and at the end of the epoch (one all-reduce and one wait each, at the same step on every rank, as
the MLPerf references check their stop conditions), and nothing else is agreed per step. A batch
with no readable image cannot be skipped by its rank alone (the others' gradient all-reduce would
wait for it): in a distributed run that rank takes the step with zero weight, on a stand-in image
in evaluation mode (BatchNorm statistics untouched), so its gradients are zeros and the others'
batches still train; a single process simply skips it.

BatchNorm statistics are per rank, as in the MLPerf reference (each replica normalises its own
batch and keeps its own running statistics): ``wrap`` asks DDP not to broadcast rank 0's buffers
before every forward (a collective per step for statistics training never reads), and
``sync_buffers`` gives every rank rank 0's before each evaluation instead.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from dataclasses import dataclass

import torch
from torch import nn

from workloads.common import distributed
from workloads.resnet50.config import TrainConfig
from workloads.resnet50.data_loader import DeviceBatch
from workloads.resnet50.errors import DatasetError
from workloads.resnet50.model import ModelConfig, ResNet50
from workloads.resnet50.optim import Schedule, build_optimizer, set_lr

AMP_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


@dataclass(frozen=True, kw_only=True)
class Precision:
    """How the forward pass runs."""

    dtype: str = "fp32"
    """'fp32', 'bf16' or 'fp16' autocast (resolved: precision.py)."""
    channels_last: bool = True
    """Inputs in channels-last memory format."""

    def autocast(self, device: torch.device) -> contextlib.AbstractContextManager:
        if self.dtype == "fp32":
            return contextlib.nullcontext()
        return torch.autocast(device_type=device.type, dtype=AMP_DTYPES[self.dtype])

    def scaler(self, device: torch.device) -> torch.amp.GradScaler:
        """A GradScaler for fp16 (its gradients underflow without one); a disabled one otherwise."""
        return torch.amp.GradScaler(device.type, enabled=self.dtype == "fp16")


@dataclass
class EpochStats:
    """What one epoch did."""

    steps: int = 0
    """Optimizer steps, zero-weight ones included (the schedule's position moves on with them)."""
    images: int = 0
    skipped: int = 0
    diverged: bool = False
    zero_weight: int = 0
    """Steps this rank took with zero weight (a batch without a readable image, in a distributed run)."""
    loss_sum: torch.Tensor | None = None
    """Sum of the step losses, on the device (read by ``mean_loss``, once)."""

    @property
    def mean_loss(self) -> float:
        counted = max(self.steps - self.zero_weight, 1)
        return float(self.loss_sum) / counted if self.loss_sum is not None else float("nan")


def train_step(model: nn.Module, batch: DeviceBatch, optimizer: torch.optim.Optimizer, criterion: nn.Module,
               lr: float, precision: Precision, scaler: torch.amp.GradScaler) -> torch.Tensor:
    """Forward, backward and optimizer step; returns the loss (on the device, not read)."""
    set_lr(optimizer, lr)
    with precision.autocast(batch.images.device):
        loss = criterion(model(batch.images), batch.labels)
    optimizer.zero_grad(set_to_none=True)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    return loss.detach()


def zero_weight_step(model: nn.Module, empty: DeviceBatch, optimizer: torch.optim.Optimizer, criterion: nn.Module,
                     lr: float, precision: Precision, scaler: torch.amp.GradScaler) -> None:
    """This rank's part of a step it has no images for: a forward and backward of one zero image,
    in evaluation mode (BatchNorm neither uses nor updates batch statistics), scaled to zero, so that
    DDP's gradient all-reduce gets zeros from this rank and the other ranks' batches still count."""
    shape = (1, *empty.images.shape[1:])
    if 0 in shape:
        raise DatasetError("a batch had no readable image before any image size was known (run `dataset verify`)")
    standin = DeviceBatch(torch.zeros(shape, device=empty.images.device), torch.zeros(
        1, dtype=torch.int64, device=empty.images.device), 1, 0)
    model.eval()
    try:
        train_step(model, standin, optimizer, ZeroWeight(criterion), lr, precision, scaler)
    finally:
        model.train()


class ZeroWeight(nn.Module):
    """``criterion`` times zero: the gradients it sends back are zeros (and finite)."""

    def __init__(self, criterion: nn.Module) -> None:
        super().__init__()
        self.criterion = criterion

    def forward(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return self.criterion(logits, labels) * 0.0


def train_epoch(model: nn.Module, batches: Iterable[DeviceBatch], optimizer: torch.optim.Optimizer,
                criterion: nn.Module, schedule: Schedule, first_step: int, precision: Precision,
                scaler: torch.amp.GradScaler, context: distributed.Context, *,
                finite_check_steps: int = 50) -> EpochStats:
    """Train over ``batches`` once; stops early (``diverged``) once a loss was not finite on any rank."""
    model.train()
    loss_sum = torch.zeros((), dtype=torch.float32, device=context.device)
    stats = EpochStats(loss_sum=loss_sum)
    not_finite = torch.zeros((), dtype=torch.int32, device=context.device)
    for batch in batches:
        stats.skipped += batch.skipped
        lr = schedule.lr(first_step + stats.steps)
        if batch.count == 0:
            if not context.is_distributed:
                continue
            zero_weight_step(model, batch, optimizer, criterion, lr, precision, scaler)
            stats.zero_weight += 1
        else:
            loss = train_step(model, batch, optimizer, criterion, lr, precision, scaler)
            loss_sum += loss.float()
            not_finite |= ~torch.isfinite(loss)
        stats.steps += 1
        stats.images += batch.count
        if stats.steps % finite_check_steps == 0 and distributed.any_rank(not_finite, context):
            stats.diverged = True
            break
    if not stats.diverged:
        stats.diverged = distributed.any_rank(not_finite, context)
    return stats


@torch.no_grad()
def evaluate(model: nn.Module, batches: Iterable[DeviceBatch], precision: Precision,
             context: distributed.Context) -> tuple[float, int]:
    """(top-1 accuracy over every rank's shard, unreadable images skipped)."""
    model.eval()
    correct = torch.zeros((), dtype=torch.int64, device=context.device)
    total = skipped = 0
    for batch in batches:
        skipped += batch.skipped
        if batch.count == 0:
            continue
        with precision.autocast(context.device):
            logits = model(batch.images)
        correct += (logits.argmax(dim=1) == batch.labels).sum()
        total += batch.count
    counts = torch.stack([correct.double(), torch.tensor(float(total), dtype=torch.float64, device=context.device),
                          torch.tensor(float(skipped), dtype=torch.float64, device=context.device)])
    correct_all, total_all, skipped_all = distributed.all_reduce_sum(counts, context).tolist()
    return correct_all / max(total_all, 1.0), int(skipped_all)


def wrap(model: nn.Module, context: distributed.Context) -> nn.Module:
    """DDP for more than one process (the kit's ``wrap``), BatchNorm statistics per rank: no
    broadcast of rank 0's buffers before each forward (``sync_buffers`` before each evaluation)."""
    return distributed.wrap(model, context, buffers_every_forward=False)


@dataclass(frozen=True)
class Network:
    """The model a run trains, what a step calls and what steps it."""

    model: nn.Module
    """The bare model on the device (BatchNorm sync, evaluation and the saved state_dict use it)."""
    network: nn.Module
    """What a training step calls: ``wrap(model)``, compiled when the config asks (the DDP-wrapped
    model, so that DDP's hooks stay outside the graph)."""
    optimizer: torch.optim.Optimizer


def build_network(config: TrainConfig, classes: int, context: distributed.Context) -> Network:
    """ResNet-50 as ``config`` shapes it for ``classes`` classes, on ``context``'s device (channels
    last when asked), its optimizer, and the network the steps call."""
    model: nn.Module = ResNet50(ModelConfig(num_classes=classes, width=config.width, layers=config.layers))
    model = model.to(context.device)
    if config.channels_last:
        model = model.to(memory_format=torch.channels_last)
    optimizer = build_optimizer(config.optimizer, model, lr=config.base_lr, momentum=config.momentum,
                                weight_decay=config.weight_decay, lars_eta=config.lars_eta,
                                lars_epsilon=config.lars_epsilon)
    network = wrap(model, context)
    if config.compile:
        network = torch.compile(network)
    return Network(model=model, network=network, optimizer=optimizer)


def sync_buffers(model: nn.Module, context: distributed.Context) -> None:
    """Give every rank rank 0's BatchNorm statistics, so that all evaluate the same model."""
    if not context.is_distributed:
        return
    for buffer in model.buffers():
        torch.distributed.broadcast(buffer, src=0)
