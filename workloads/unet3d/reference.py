"""The MLPerf training reference's unet3d (mlcommons/training ``retired_benchmarks/unet3d/pytorch``),
imported from its folder at run time through `workloads.common.mlcommons`: its model, loss, score,
sliding-window inference and loss reduction, and our closed model's weights copied into its model.
Benchmarks time and compare against it (benchmarks/unet3d_gpu_throughput.py)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from workloads.common.mlcommons import import_from


class NotTheReference(ValueError):
    """The folder is not the reference's, or its model is not ours parameter for parameter."""


@dataclass
class Reference:
    """The pieces of the reference implementation a benchmark calls."""

    unet3d: type
    dice_ce_loss: type
    dice_score: type
    sliding_window_inference: Callable
    reduce_tensor: Callable


def import_reference(folder: Path) -> Reference:
    """Import the reference's model, loss, score and inference from ``folder`` (its pytorch/ folder)."""
    if not (folder / "model" / "unet3d.py").is_file() or not (folder / "runtime" / "inference.py").is_file():
        raise NotTheReference(f"{folder}: not the reference's unet3d pytorch folder "
                              "(expected model/unet3d.py and runtime/inference.py)")
    losses, unet3d, distributed_utils, inference = import_from(
        folder, ("model.losses", "model.unet3d", "runtime.distributed_utils", "runtime.inference"))
    logging.getLogger("mllog_default").disabled = True  # its layers log weights_initialization per conv
    return Reference(unet3d.Unet3D, losses.DiceCELoss, losses.DiceScore, inference.sliding_window_inference,
                     distributed_utils.reduce_tensor)


def copy_weights(ours: torch.nn.Module, theirs: torch.nn.Module) -> None:
    """Our closed model's parameters into the reference's, by registration order (same architecture)."""
    mine, other = list(ours.parameters()), list(theirs.parameters())
    if len(mine) != len(other) or any(a.shape != b.shape for a, b in zip(mine, other, strict=True)):
        raise NotTheReference("the reference's model does not match ours parameter for parameter")
    with torch.no_grad():
        for a, b in zip(mine, other, strict=True):
            b.copy_(a)
