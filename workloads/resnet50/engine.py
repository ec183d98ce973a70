"""One training epoch and one evaluation pass; what the loop in train.py repeats."""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass

import torch
from torch import nn
from torch.utils.data import DataLoader

from workloads.resnet50 import distributed
from workloads.resnet50.data_loader import Batch, normalize
from workloads.resnet50.optim import Schedule, set_lr

AMP_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


@dataclass(frozen=True, kw_only=True)
class Precision:
    """How the forward pass runs."""

    amp: str = "none"
    """'none', 'bf16' or 'fp16' autocast."""
    channels_last: bool = True
    """Inputs in channels-last memory format."""

    def autocast(self, device: torch.device):
        if self.amp == "none":
            return contextlib.nullcontext()
        return torch.autocast(device_type=device.type, dtype=AMP_DTYPES[self.amp])


@dataclass
class EpochStats:
    """What one epoch did."""

    steps: int = 0
    images: int = 0
    skipped: int = 0
    loss_sum: float = 0.0
    diverged: bool = False

    @property
    def mean_loss(self) -> float:
        return self.loss_sum / max(self.steps, 1)


def train_epoch(model: nn.Module, loader: DataLoader, optimizer: torch.optim.Optimizer,
                criterion: nn.Module, schedule: Schedule, first_step: int, precision: Precision,
                scaler: torch.amp.GradScaler, context: distributed.Context) -> EpochStats:
    """Train over ``loader`` once; stops early (``diverged``) on a non-finite loss."""
    model.train()
    stats = EpochStats()
    for batch in loader:
        batch: Batch
        stats.skipped += batch.skipped
        if batch.labels.numel() == 0:
            continue
        images = normalize(batch.images.to(context.device, non_blocking=True), channels_last=precision.channels_last)
        labels = batch.labels.to(context.device, non_blocking=True)
        set_lr(optimizer, schedule.lr(first_step + stats.steps))
        with precision.autocast(context.device):
            loss = criterion(model(images), labels)
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        value = float(loss.detach())
        stats.steps += 1
        stats.images += labels.numel()
        stats.loss_sum += value
        if not math.isfinite(value):
            stats.diverged = True
            break
    return stats


@torch.no_grad()
def evaluate(model: nn.Module, loader: DataLoader, precision: Precision,
             context: distributed.Context) -> tuple[float, int]:
    """(top-1 accuracy over every rank's shard, unreadable images skipped)."""
    model.eval()
    correct = total = skipped = 0
    for batch in loader:
        batch: Batch
        skipped += batch.skipped
        if batch.labels.numel() == 0:
            continue
        images = normalize(batch.images.to(context.device), channels_last=precision.channels_last)
        with precision.autocast(context.device):
            logits = model(images)
        correct += int((logits.argmax(dim=1).cpu() == batch.labels).sum())
        total += batch.labels.numel()
    counts = torch.tensor([correct, total, skipped], dtype=torch.float64, device=context.device)
    correct_all, total_all, skipped_all = distributed.all_reduce_sum(counts, context).tolist()
    return correct_all / max(total_all, 1.0), int(skipped_all)


def sync_buffers(model: nn.Module, context: distributed.Context) -> None:
    """Give every rank rank 0's BatchNorm statistics, so that all evaluate the same model."""
    if not context.is_distributed:
        return
    for buffer in model.buffers():
        torch.distributed.broadcast(buffer, src=0)
