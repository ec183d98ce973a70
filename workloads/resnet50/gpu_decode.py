"""JPEG decoding and the ResNet augmentations on the GPU: nvJPEG through torchvision, crops in torch.

Loader workers only read files (bytes, no decoding); the training process decodes a whole batch
with ``torchvision.io.decode_jpeg(..., device="cuda")`` (in one call from torchvision 0.19 on,
which takes a list; one call per image before: 0.18 takes a single tensor), then per image on the
device: the random-resized crop (its box drawn on the host from the image size, by the same rule as
the PIL path, from a generator seeded per rank), an antialiased bilinear resize to ``crop`` x
``crop`` and a horizontal flip with probability 0.5; evaluation resizes the shorter side and takes the centre.
A file nvJPEG refuses (CMYK, a PNG named .JPEG, a damaged file) is decoded by PIL on the host
instead; one PIL cannot decode either is reported and skipped, as in the PIL path. The first
refusal of a pass is said on stderr (file, error, PIL taking over), and every pass ends with one
stderr line counting the images each decoder did and their images/s (host time spent in the decode
calls: PIL's is all of its work, nvJPEG's excludes device work it leaves queued).

torchvision is imported only by ``torchvision_decoder()``; everything else is plain torch, so the
pipeline runs (and is tested) on the CPU with any decoder of the same signature.
"""

from __future__ import annotations

import io
import re
import sys
import time
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
    empty_batch,
    random_resized_box,
    report_unreadable,
    to_tensor,
)
from workloads.resnet50.layout import DECODE_ERRORS

Decoder = Callable[[list[torch.Tensor], torch.device], list[torch.Tensor]]
"""(encoded files as uint8 1-D CPU tensors, device) -> decoded (3, H, W) uint8 images on the device."""


LIST_DECODE_VERSION = (0, 19)
"""First torchvision whose ``decode_jpeg`` takes a list of images (a batched nvJPEG decode)."""


def takes_lists(version: str) -> bool:
    """Whether torchvision ``version`` ('0.18.0a0+6043bc2', '0.19.1+cu121') decodes a list in one call."""
    found = re.match(r"(\d+)\.(\d+)", version)
    return found is not None and (int(found[1]), int(found[2])) >= LIST_DECODE_VERSION


@dataclass(frozen=True)
class TorchvisionDecoder:
    """nvJPEG through ``torchvision.io.decode_jpeg``: the batch in one call where torchvision takes a
    list, else one call per image (never a silent fall back to PIL for every image)."""

    decode_jpeg: Callable
    mode: object
    """``ImageReadMode.RGB``."""
    version: str
    """torchvision's version."""

    @property
    def batched(self) -> bool:
        return takes_lists(self.version)

    @property
    def how(self) -> str:
        """The decoder as the log names it."""
        if self.batched:
            return f"nvJPEG through torchvision {self.version}, the batch in one call"
        return f"nvJPEG through torchvision {self.version}, one image per call (a batch in one call needs 0.19)"

    def __call__(self, data: list[torch.Tensor], device: torch.device) -> list[torch.Tensor]:
        if self.batched:
            return list(self.decode_jpeg(data, mode=self.mode, device=device))
        return [self.decode_jpeg(item, mode=self.mode, device=device) for item in data]


def torchvision_decoder() -> TorchvisionDecoder | None:
    """nvJPEG decoding through torchvision, or None where torchvision cannot be imported."""
    try:
        import torchvision
        from torchvision.io import ImageReadMode, decode_jpeg
    except Exception:  # noqa: BLE001 (a torchvision built for another torch fails in many ways)
        return None
    return TorchvisionDecoder(decode_jpeg, ImageReadMode.RGB, str(getattr(torchvision, "__version__", "0.0")))


def stderr_line(message: str) -> None:
    """One line for humans on stderr (stdout carries the MLLOG lines)."""
    sys.stderr.write(f"resnet50: {message}\n")
    sys.stderr.flush()


@dataclass
class DecodeTally:
    """What the decoders did over one pass of a pipeline."""

    by_decoder: int = 0
    """Images the pipeline's decoder (nvJPEG) decoded."""
    by_pil: int = 0
    """Images it refused that PIL decoded on the host."""
    decoder_seconds: float = 0.0
    """Host time in the decoder's calls."""
    pil_seconds: float = 0.0
    """Host time in PIL's fallback decodes."""
    first_refusal: str = ""
    """'path: error' of the first image the decoder refused ('' while none was)."""

    @staticmethod
    def rate(images: int, seconds: float) -> float:
        return images / seconds if seconds > 0 else 0.0

    def summary(self, decoder: str) -> str:
        """One line: images and images/s per decoder."""
        line = (f"{self.by_decoder} images by {decoder} at {self.rate(self.by_decoder, self.decoder_seconds):.1f} "
                f"images/s (host time in its calls)")
        if self.by_pil:
            line += (f", {self.by_pil} by PIL on the host (nvJPEG refused them) at "
                     f"{self.rate(self.by_pil, self.pil_seconds):.1f} images/s")
        return line


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


def _timed(call: Callable[[], object]) -> tuple[object, float]:
    started = time.perf_counter()
    result = call()
    return result, time.perf_counter() - started


def decode_batch(decoder: Decoder, batch: EncodedBatch, device: torch.device,
                 tally: DecodeTally | None = None) -> tuple[list[torch.Tensor], list[int]]:
    """(decoded images, their indices in the batch): the batch in one call, else image by image,
    falling back to PIL on the host; an image nothing decodes is reported and left out. ``tally``
    counts and times what each decoder did, and keeps the refusals."""
    tally = DecodeTally() if tally is None else tally
    if not batch.data:
        return [], []
    try:
        images, seconds = _timed(lambda: decoder(batch.data, device))
    except (RuntimeError, ValueError):  # what torchvision raises for a file nvJPEG cannot decode
        pass
    else:
        tally.by_decoder += len(batch.data)
        tally.decoder_seconds += seconds
        return images, list(range(len(batch.data)))
    images, kept = [], []
    for index, data in enumerate(batch.data):
        started = time.perf_counter()
        try:
            image = decoder([data], device)[0]
        except (RuntimeError, ValueError) as refusal:
            started = time.perf_counter()
            try:
                image = pil_decode(data).to(device)
            except DECODE_ERRORS as error:
                report_unreadable(Path(batch.paths[index]), error)
                continue
            tally.by_pil += 1
            tally.pil_seconds += time.perf_counter() - started
            if not tally.first_refusal:
                detail = " ".join(str(refusal).split()) or type(refusal).__name__
                tally.first_refusal = f"{batch.paths[index]}: {detail}"
        else:
            tally.by_decoder += 1
            tally.decoder_seconds += time.perf_counter() - started
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
    """Loader workers read bytes; decode, augment and normalize happen on ``device``.

    ``report`` says a pass's first PIL fallback and, with ``summarise``, the decoder in use (once)
    and what each decoder did in the pass and at what rate (one line at its end)."""

    def __init__(self, loader: DataLoader, sampler: ShardSampler, decoder: Decoder,
                 augment: TrainAugment | EvalAugment, normalizer: Normalizer, device: torch.device, *,
                 seed: int, name: str = "torchvision", report: Callable[[str], None] = stderr_line,
                 summarise: bool = True) -> None:
        self.loader, self.sampler, self.decoder, self.augment = loader, sampler, decoder, augment
        self.normalizer, self.device, self.name = normalizer, device, name
        self.generator = torch.Generator().manual_seed(seed)
        self.report, self.summarise = report, summarise
        self.announced = False

    @property
    def how(self) -> str:
        """The decoder as the log names it."""
        return str(getattr(self.decoder, "how", self.name))

    @property
    def purpose(self) -> str:
        return "training" if isinstance(self.augment, TrainAugment) else "evaluation"

    def _say_first_refusal(self, tally: DecodeTally, said: bool) -> bool:
        if tally.first_refusal and not said:
            self.report(f"{self.purpose} decode: {self.how} refused {tally.first_refusal}; PIL decodes it on the "
                        "host (further refusals of this pass are counted at its end)")
            return True
        return said

    def set_epoch(self, epoch: int) -> None:
        self.sampler.set_epoch(epoch)

    def __len__(self) -> int:
        return len(self.loader)

    def __iter__(self) -> Iterator[DeviceBatch]:
        if self.summarise and not self.announced:
            self.report(f"{self.purpose} decode: {self.how}")
            self.announced = True
        tally, said = DecodeTally(), False
        for batch in self.loader:
            batch: EncodedBatch
            images, kept = decode_batch(self.decoder, batch, self.device, tally)
            said = self._say_first_refusal(tally, said)
            skipped = batch.skipped + len(batch.data) - len(kept)
            if not images:
                yield empty_batch(self.augment.crop, self.device, skipped)
                continue
            labels = batch.labels if len(kept) == len(batch.data) else batch.labels[kept]
            pixels = self.augment(images, self.generator)
            yield DeviceBatch(self.normalizer(pixels), labels.to(self.device, non_blocking=True), len(kept), skipped)
        if self.summarise:
            self.report(f"{self.purpose} decode: {tally.summary(self.how)}")
