"""JPEG decoding and the ResNet augmentations on the GPU: nvJPEG through torchvision, crops in torch.

Loader workers only read files (bytes, no decoding); the training process decodes a whole batch
with ``torchvision.io.decode_jpeg(..., device="cuda")``, then per image on the device: the
random-resized crop (its box drawn on the host from the image size, by the same rule as the PIL
path, from a generator seeded per rank), an antialiased bilinear resize to ``crop`` x ``crop`` and
a horizontal flip with probability 0.5; evaluation resizes the shorter side and takes the centre.
A file nvJPEG refuses (CMYK, a PNG named .JPEG, a damaged file) is decoded by PIL on the host
instead; one PIL cannot decode either is reported and skipped, as in the PIL path.

torchvision is imported only by ``torchvision_decoder()``; everything else is plain torch, so the
pipeline runs (and is tested) on the CPU with any decoder of the same signature.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from PIL import Image
from torch.utils.data import DataLoader, Dataset

from workloads.resnet50.data_loader import (
    DeviceBatch,
    Normalizer,
    ShardSampler,
    random_resized_box,
    report_unreadable,
    to_tensor,
)
from workloads.resnet50.layout import DECODE_ERRORS

Decoder = Callable[[list[torch.Tensor], torch.device], list[torch.Tensor]]
"""(encoded files as uint8 1-D CPU tensors, device) -> decoded (3, H, W) uint8 images on the device."""


def torchvision_decoder() -> Decoder | None:
    """Batch nvJPEG decoding through torchvision, or None where torchvision cannot be imported."""
    try:
        from torchvision.io import ImageReadMode, decode_jpeg
    except Exception:  # noqa: BLE001 (a torchvision built for another torch fails in many ways)
        return None

    def decode(data: list[torch.Tensor], device: torch.device) -> list[torch.Tensor]:
        return list(decode_jpeg(data, mode=ImageReadMode.RGB, device=device))

    return decode


def pil_decode(data: torch.Tensor) -> torch.Tensor:
    """(3, H, W) uint8 on the host from encoded bytes; raises one of DECODE_ERRORS."""
    with Image.open(io.BytesIO(data.numpy().tobytes())) as image:
        return to_tensor(image.convert("RGB"))


class EncodedFolder(Dataset):
    """(file bytes, label, path) samples, read but not decoded; an unreadable file yields None."""

    def __init__(self, samples: Sequence[tuple[Path, int]]) -> None:
        self.samples = samples

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int, str] | None:
        path, label = self.samples[index]
        try:
            data = path.read_bytes()
        except OSError as error:
            report_unreadable(path, error)
            return None
        return torch.frombuffer(bytearray(data), dtype=torch.uint8), label, str(path)


@dataclass(frozen=True)
class EncodedBatch:
    """Encoded files of one batch, their labels, and how many files could not be read."""

    data: list[torch.Tensor]
    labels: torch.Tensor
    paths: list[str]
    skipped: int

    def pin_memory(self) -> EncodedBatch:
        """Pinned labels; the encoded bytes stay pageable (nvJPEG parses them on the host first)."""
        return EncodedBatch(self.data, self.labels.pin_memory(), self.paths, self.skipped)


def collate_encoded(items: list[tuple[torch.Tensor, int, str] | None]) -> EncodedBatch:
    good = [item for item in items if item is not None]
    return EncodedBatch([data for data, _, _ in good], torch.tensor([label for _, label, _ in good], dtype=torch.int64),
                        [path for _, _, path in good], len(items) - len(good))


def decode_batch(decoder: Decoder, batch: EncodedBatch, device: torch.device) -> tuple[list[torch.Tensor], list[int]]:
    """(decoded images, their indices in the batch): the batch in one call, else image by image,
    falling back to PIL on the host; an image nothing decodes is reported and left out."""
    if not batch.data:
        return [], []
    try:
        return decoder(batch.data, device), list(range(len(batch.data)))
    except (RuntimeError, ValueError):  # what torchvision raises for a file nvJPEG cannot decode
        pass
    images, kept = [], []
    for index, data in enumerate(batch.data):
        try:
            image = decoder([data], device)[0]
        except (RuntimeError, ValueError):
            try:
                image = pil_decode(data).to(device)
            except DECODE_ERRORS as error:
                report_unreadable(Path(batch.paths[index]), error)
                continue
        images.append(image)
        kept.append(index)
    return images, kept


def resize(image: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """(3, h, w) uint8 -> (3, H, W) float32 pixels, bilinear with antialiasing (as PIL's BILINEAR)."""
    return F.interpolate(image[None].float(), size=size, mode="bilinear", antialias=True, align_corners=False)[0]


@dataclass(frozen=True, kw_only=True)
class TrainAugment:
    """Random-resized crop to ``crop`` x ``crop`` and a random horizontal flip, image by image."""

    crop: int
    """Output side in pixels."""

    def __call__(self, images: list[torch.Tensor], generator: torch.Generator) -> torch.Tensor:
        out = []
        for image in images:
            left, top, right, bottom = random_resized_box(image.shape[2], image.shape[1], generator=generator)
            resized = resize(image[:, top:bottom, left:right], (self.crop, self.crop))
            if float(torch.rand((), generator=generator)) < 0.5:
                resized = resized.flip(-1)
            out.append(resized)
        return torch.stack(out)  # (B, 3, crop, crop)


@dataclass(frozen=True, kw_only=True)
class EvalAugment:
    """Resize the shorter side to ``resize``, then the centre ``crop`` x ``crop``."""

    resize: int
    """Shorter side after resizing."""
    crop: int
    """Output side in pixels."""

    def __call__(self, images: list[torch.Tensor], generator: torch.Generator) -> torch.Tensor:
        out = []
        for image in images:
            height, width = image.shape[1], image.shape[2]
            scale = self.resize / min(width, height)
            size = (max(self.resize, round(height * scale)), max(self.resize, round(width * scale)))
            top, left = (size[0] - self.crop) // 2, (size[1] - self.crop) // 2
            out.append(resize(image, size)[:, top : top + self.crop, left : left + self.crop])
        return torch.stack(out)  # (B, 3, crop, crop)


class DevicePipeline:
    """Loader workers read bytes; decode, augment and normalize happen on ``device``."""

    def __init__(self, loader: DataLoader, sampler: ShardSampler, decoder: Decoder,
                 augment: TrainAugment | EvalAugment, normalizer: Normalizer, device: torch.device, *,
                 seed: int, name: str = "torchvision") -> None:
        self.loader, self.sampler, self.decoder, self.augment = loader, sampler, decoder, augment
        self.normalizer, self.device, self.name = normalizer, device, name
        self.generator = torch.Generator().manual_seed(seed)

    def set_epoch(self, epoch: int) -> None:
        self.sampler.set_epoch(epoch)

    def __len__(self) -> int:
        return len(self.loader)

    def __iter__(self) -> Iterator[DeviceBatch]:
        for batch in self.loader:
            batch: EncodedBatch
            images, kept = decode_batch(self.decoder, batch, self.device)
            skipped = batch.skipped + len(batch.data) - len(kept)
            if not images:
                yield DeviceBatch(torch.empty(0, 3, 0, 0), torch.empty(0, dtype=torch.int64), 0, skipped)
                continue
            labels = batch.labels if len(kept) == len(batch.data) else batch.labels[kept]
            pixels = self.augment(images, self.generator)
            yield DeviceBatch(self.normalizer(pixels), labels.to(self.device, non_blocking=True), len(kept), skipped)
