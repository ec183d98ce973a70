"""Images in, batches out: PIL decoding, the ResNet augmentations, loaders over the ImageNet layout.

Training: random-resized crop (scale 0.08-1, aspect ratio 3/4-4/3, area-uniform and log-ratio
uniform, ten tries then a centre crop) and a horizontal flip with probability 0.5. Evaluation:
resize the shorter side to 256, centre crop 224. Sizes are configurable for smoke runs.
Workers hand uint8 (3, H, W) tensors to the trainer (4x less IPC than floats), in pinned memory
when the loader pins; ``HostPipeline`` copies them to the device without blocking and normalizes
there with a ``Normalizer`` built once. A file that cannot be decoded is reported on stderr and
skipped; it never stops training. gpu_decode.py is the nvJPEG path that shares the pieces here.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset, Sampler

from workloads.resnet50.layout import DECODE_ERRORS

MEAN_RGB = (0.485 * 255, 0.456 * 255, 0.406 * 255)
STD_RGB = (0.229 * 255, 0.224 * 255, 0.225 * 255)


def _uniform(low: float, high: float, generator: torch.Generator | None) -> float:
    """A draw from ``generator``, or from the torch RNG (which DataLoader seeds per worker)."""
    return low + (high - low) * float(torch.rand((), generator=generator))


def random_resized_box(width: int, height: int, scale: tuple[float, float] = (0.08, 1.0),
                       ratio: tuple[float, float] = (3 / 4, 4 / 3),
                       generator: torch.Generator | None = None) -> tuple[int, int, int, int]:
    """(left, top, right, bottom) of a random crop covering ``scale`` of the area at ``ratio``."""
    area = width * height
    log_low, log_high = math.log(ratio[0]), math.log(ratio[1])
    for _ in range(10):
        target = area * _uniform(*scale, generator)
        aspect = math.exp(_uniform(log_low, log_high, generator))
        w = round(math.sqrt(target * aspect))
        h = round(math.sqrt(target / aspect))
        if 0 < w <= width and 0 < h <= height:
            left = int(torch.randint(0, width - w + 1, (), generator=generator))
            top = int(torch.randint(0, height - h + 1, (), generator=generator))
            return left, top, left + w, top + h
    # fallback: the largest centre crop whose aspect ratio is within bounds
    aspect = width / height
    if aspect < ratio[0]:
        w, h = width, round(width / ratio[0])
    elif aspect > ratio[1]:
        w, h = round(height * ratio[1]), height
    else:
        w, h = width, height
    left, top = (width - w) // 2, (height - h) // 2
    return left, top, left + w, top + h


def to_tensor(image: Image.Image) -> torch.Tensor:
    """(3, H, W) uint8."""
    return torch.from_numpy(np.asarray(image, dtype=np.uint8).copy()).permute(2, 0, 1)


@dataclass(frozen=True, kw_only=True)
class TrainTransform:
    """Random-resized crop to ``crop`` x ``crop`` and a random horizontal flip."""

    crop: int = 224
    """Output side in pixels."""

    def __call__(self, image: Image.Image) -> torch.Tensor:
        box = random_resized_box(*image.size)
        image = image.resize((self.crop, self.crop), Image.BILINEAR, box=box)
        if float(torch.rand(())) < 0.5:
            image = image.transpose(Image.FLIP_LEFT_RIGHT)
        return to_tensor(image)


@dataclass(frozen=True, kw_only=True)
class EvalTransform:
    """Resize the shorter side to ``resize``, then a centre crop of ``crop`` x ``crop``."""

    resize: int = 256
    """Shorter side after resizing."""
    crop: int = 224
    """Output side in pixels."""

    def __post_init__(self) -> None:
        if self.crop > self.resize:
            raise ValueError(f"crop {self.crop} exceeds resize {self.resize}")

    def __call__(self, image: Image.Image) -> torch.Tensor:
        width, height = image.size
        scale = self.resize / min(width, height)
        size = (max(self.resize, round(width * scale)), max(self.resize, round(height * scale)))
        image = image.resize(size, Image.BILINEAR)
        left, top = (size[0] - self.crop) // 2, (size[1] - self.crop) // 2
        return to_tensor(image.crop((left, top, left + self.crop, top + self.crop)))


def report_unreadable(path: Path, error: Exception) -> None:
    detail = " ".join(str(error).split()) or type(error).__name__
    sys.stderr.write(f"resnet50: skipping unreadable image {path}: {detail}\n")


class ImageFolder(Dataset):
    """(path, label) samples decoded with PIL; an unreadable file yields None (see collate_skipping)."""

    def __init__(self, samples: Sequence[tuple[Path, int]], transform: TrainTransform | EvalTransform) -> None:
        self.samples = samples
        self.transform = transform

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int] | None:
        path, label = self.samples[index]
        try:
            with Image.open(path) as image:
                return self.transform(image.convert("RGB")), label
        except DECODE_ERRORS as error:
            report_unreadable(path, error)
            return None


@dataclass(frozen=True)
class Batch:
    """Images (B, 3, H, W) uint8, labels (B,) int64, and how many samples were unreadable."""

    images: torch.Tensor
    labels: torch.Tensor
    skipped: int

    def pin_memory(self) -> Batch:
        """What DataLoader(pin_memory=True) calls on a custom batch type: the tensors in page-locked
        memory, so that the copy to the GPU runs asynchronously (non_blocking=True)."""
        return Batch(self.images.pin_memory(), self.labels.pin_memory(), self.skipped)


def collate_skipping(items: list[tuple[torch.Tensor, int] | None]) -> Batch:
    good = [item for item in items if item is not None]
    if not good:
        return Batch(torch.empty(0, 3, 0, 0, dtype=torch.uint8), torch.empty(0, dtype=torch.int64), len(items))
    images = torch.stack([image for image, _ in good])
    labels = torch.tensor([label for _, label in good], dtype=torch.int64)
    return Batch(images, labels, len(items) - len(good))


class ShardSampler(Sampler[int]):
    """This rank's share of a dataset: optionally shuffled per epoch (same order on all ranks), no padding.

    Training drops the tail so that every rank runs the same number of steps; evaluation keeps every
    sample exactly once across ranks so that accuracy is exact.
    """

    def __init__(self, size: int, *, rank: int, world: int, shuffle: bool, seed: int, batch_size: int,
                 drop_last: bool) -> None:
        self.size, self.rank, self.world = size, rank, world
        self.shuffle, self.seed = shuffle, seed
        self.usable = (size // (batch_size * world)) * batch_size * world if drop_last else size
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self):
        if self.shuffle:
            generator = torch.Generator().manual_seed(self.seed * 1_000_003 + self.epoch)
            order = torch.randperm(self.size, generator=generator)[: self.usable].tolist()
        else:
            order = list(range(self.usable))
        return iter(order[self.rank :: self.world])

    def __len__(self) -> int:
        return len(range(self.rank, self.usable, self.world))


def make_loader(dataset: Dataset, sampler: ShardSampler, *, batch_size: int, workers: int, seed: int,
                pin_memory: bool, collate: Callable = collate_skipping) -> DataLoader:
    """Batches of ``dataset`` in ``sampler``'s order; ``pin_memory`` for a CUDA device."""
    return DataLoader(
        dataset,
        batch_size=batch_size,
        sampler=sampler,
        num_workers=workers,
        collate_fn=collate,
        persistent_workers=workers > 0,
        pin_memory=pin_memory,
        prefetch_factor=4 if workers > 0 else None,
        generator=torch.Generator().manual_seed(seed),
    )


class Normalizer:
    """(B, 3, H, W) uint8 or float pixels -> float32 normalized with the ImageNet mean and std.

    Mean and std live on the device from construction on: a call builds no tensor from host data
    (which on a GPU would be a blocking copy per step).
    """

    def __init__(self, device: torch.device, *, channels_last: bool) -> None:
        std = torch.tensor(STD_RGB, dtype=torch.float32).view(1, 3, 1, 1)
        mean = torch.tensor(MEAN_RGB, dtype=torch.float32).view(1, 3, 1, 1)
        self.scale = (1.0 / std).to(device)
        self.shift = (-mean / std).to(device)
        self.memory_format = torch.channels_last if channels_last else torch.contiguous_format

    def __call__(self, images: torch.Tensor) -> torch.Tensor:
        out = torch.addcmul(self.shift, images.float(), self.scale)  # (x - mean) / std
        return out.contiguous(memory_format=self.memory_format)


@dataclass(frozen=True)
class DeviceBatch:
    """A batch on the device, ready for the model."""

    images: torch.Tensor
    """(B, 3, H, W) float32, normalized, in the model's memory format."""
    labels: torch.Tensor
    """(B,) int64."""
    count: int
    """B, known on the host (0: every image of the batch was unreadable)."""
    skipped: int
    """Unreadable images dropped from this batch."""


def empty_batch(crop: int, device: torch.device, skipped: int) -> DeviceBatch:
    """A batch with no readable image: (0, 3, crop, crop) images, so a step can still be shaped from it."""
    return DeviceBatch(torch.empty(0, 3, crop, crop, device=device), torch.empty(0, dtype=torch.int64, device=device),
                       0, skipped)


class HostPipeline:
    """PIL decoding and augmentation in loader workers; copy to the device and normalize there."""

    name = "pil"

    def __init__(self, loader: DataLoader, sampler: ShardSampler, normalizer: Normalizer,
                 device: torch.device, *, crop: int = 0) -> None:
        self.loader, self.sampler, self.normalizer, self.device = loader, sampler, normalizer, device
        self.crop = crop
        """Side of the images (the shape of a batch with none readable; 0: unknown)."""

    def set_epoch(self, epoch: int) -> None:
        self.sampler.set_epoch(epoch)

    def __len__(self) -> int:
        return len(self.loader)

    def __iter__(self) -> Iterator[DeviceBatch]:
        for batch in self.loader:
            batch: Batch
            count = batch.labels.numel()
            if count == 0:
                yield empty_batch(self.crop, self.device, batch.skipped)
                continue
            images = batch.images.to(self.device, non_blocking=True)
            labels = batch.labels.to(self.device, non_blocking=True)
            yield DeviceBatch(self.normalizer(images), labels, count, batch.skipped)
