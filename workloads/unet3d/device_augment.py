"""Flips, brightness and Gaussian noise of a training batch, applied on the model's device.

The loader's workers crop on the CPU and draw each sample's decisions (``augment.draw_params``);
this applies them where the batch already is, so the GPU, not the host, does the per-voxel work.
Same distributions as the CPU path (``augment.augment``): for a given sample seed the flips and
the brightness factor are the same, and the noise has the same standard deviation (its values come
from a torch generator seeded by the sample, so a run stays reproducible).

The parameter rows stay on the host: reading them costs no device synchronisation.
"""

from __future__ import annotations

import torch

from workloads.unet3d.augment import FLIP_COLUMNS, NOISE_SEED_COLUMN, NOISE_STD_COLUMN, SCALE_COLUMN


def noise_like(sample: torch.Tensor, seed: int) -> torch.Tensor:
    """Standard normal noise shaped like ``sample``, on its device, from a generator seeded by ``seed``."""
    if sample.device.type == "meta":  # no generator on meta; shapes are all that matter there
        return torch.randn(sample.shape, dtype=sample.dtype, device=sample.device)
    generator = torch.Generator(device=sample.device)
    generator.manual_seed(seed)
    return torch.randn(sample.shape, dtype=sample.dtype, device=sample.device, generator=generator)


def apply(image: torch.Tensor, label: torch.Tensor, params: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Augment a batch in place and return it.

    image (B, 1, D, H, W) float32 and label (B, 1, D, H, W) on one device; params (B, N_PARAMS)
    on the CPU, one ``draw_params`` row per sample.
    """
    if params.device.type != "cpu":
        raise ValueError("augmentation parameters must stay on the CPU (reading them must not wait for a device)")
    for b, row in enumerate(params.tolist()):
        dims = [axis + 1 for axis, column in enumerate(FLIP_COLUMNS) if row[column]]  # sample (1, D, H, W)
        if dims:
            image[b] = image[b].flip(dims)
            label[b] = label[b].flip(dims)
        if row[SCALE_COLUMN] != 1.0:
            image[b].mul_(row[SCALE_COLUMN])
        if row[NOISE_STD_COLUMN] > 0.0:
            image[b].add_(noise_like(image[b], int(row[NOISE_SEED_COLUMN])), alpha=row[NOISE_STD_COLUMN])
    return image, label
