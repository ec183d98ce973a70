"""An ImageNet-like synthetic dataset: real JPEG files in the ImageNet layout, classes a CNN can learn.

Class ``k`` is a two-colour stripe texture: its hue, its second colour and the stripe orientation and
frequency are fixed per class; phase, brightness, a small hue shift, noise and an occluding ellipse of
a random colour vary per image. The texture covers the whole image, so random-resized crops and flips
keep the class visible. A fixed fraction of each validation class folder holds images drawn from
another class (mislabelled, like ImageNet's own label noise), so validation accuracy stays below 1.0:
the closed resnet compliance rules reject an ``eval_accuracy`` of 1.0.
Everything is drawn from ``numpy.random.default_rng`` seeded per image, so the bytes are a pure
function of the arguments.
"""

from __future__ import annotations

import colorsys
import io
import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

from workloads.common.atomic import staged_folder
from workloads.resnet50.layout import READY_MARKER

GOLDEN = 0.6180339887498949


@dataclass(frozen=True, kw_only=True)
class SyntheticSpec:
    """What to generate."""

    classes: int = 10
    """Number of classes (class folders n10000000, n10000001, ...)."""
    train_per_class: int = 64
    """Training images per class."""
    val_per_class: int = 20
    """Validation images per class."""
    size: int = 40
    """Width and height of every image in pixels."""
    mislabeled: float = 0.05
    """Fraction of each validation class folder drawn from another class."""
    seed: int = 0
    """Seed of the generator (the dataset seed, not the training seed)."""
    quality: int = 90
    """JPEG quality."""

    def __post_init__(self) -> None:
        checks = {
            "classes": self.classes >= 2,
            "train_per_class": self.train_per_class >= 1,
            "val_per_class": self.val_per_class >= 1,
            "size": 8 <= self.size <= 4096,
            "mislabeled": 0.0 <= self.mislabeled < 0.5,
            "seed": self.seed >= 0,
            "quality": 1 <= self.quality <= 100,
        }
        for name, ok in checks.items():
            if not ok:
                raise ValueError(f"invalid {name}: {getattr(self, name)!r}")

    def wnid(self, label: int) -> str:
        return f"n{10_000_000 + label:08d}"

    def counts(self) -> dict[str, int]:
        return {"train": self.classes * self.train_per_class, "val": self.classes * self.val_per_class}


def class_look(label: int, classes: int) -> tuple[np.ndarray, np.ndarray, float, float]:
    """(first colour, second colour, stripe angle, stripes per image) of one class."""
    hue = label / classes
    second = (hue + 0.25 + 0.5 * ((label * GOLDEN) % 1.0)) % 1.0
    first_rgb = np.array(colorsys.hsv_to_rgb(hue, 0.85, 0.9)) * 255.0
    second_rgb = np.array(colorsys.hsv_to_rgb(second, 0.5, 0.35 + 0.5 * ((label * 0.37) % 1.0))) * 255.0
    angle = math.pi * ((label * GOLDEN * 3.0) % 1.0)
    stripes = 1.5 + (label % 4)
    return first_rgb, second_rgb, angle, stripes


def render(label: int, classes: int, size: int, rng: np.random.Generator) -> np.ndarray:
    """One (size, size, 3) uint8 image of class ``label``."""
    first, second, angle, stripes = class_look(label, classes)
    angle += rng.normal(0.0, 0.08)
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32) / size
    phase = rng.uniform(0, 2 * math.pi)
    wave = 0.5 + 0.5 * np.sin(2 * math.pi * stripes * (xx * math.cos(angle) + yy * math.sin(angle)) + phase)
    image = wave[..., None] * first + (1.0 - wave[..., None]) * second  # (H, W, 3)
    image = image * rng.uniform(0.75, 1.2) + rng.normal(0.0, 10.0, size=3)
    image = image + rng.normal(0.0, 12.0, size=image.shape)
    picture = Image.fromarray(np.clip(image, 0, 255).astype(np.uint8))
    radius = rng.uniform(0.1, 0.3) * size
    cx, cy = rng.uniform(0, size, size=2)
    fill = tuple(int(c) for c in rng.integers(0, 256, size=3))
    ImageDraw.Draw(picture).ellipse((cx - radius, cy - radius * 0.7, cx + radius, cy + radius * 0.7), fill=fill)
    return np.asarray(picture)


def jpeg_bytes(pixels: np.ndarray, quality: int) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="JPEG", quality=quality)
    return buffer.getvalue()


def _image_rng(spec: SyntheticSpec, split: str, label: int, index: int) -> np.random.Generator:
    return np.random.default_rng([spec.seed, 0 if split == "train" else 1, label, index])


def drawn_class(spec: SyntheticSpec, split: str, label: int, index: int, rng: np.random.Generator) -> int:
    """The class image ``index`` of folder ``label`` is rendered from: another one for the first
    ``round(val_per_class * mislabeled)`` images of each validation folder, else its own."""
    if split == "val" and index < round(spec.val_per_class * spec.mislabeled):
        return (label + 1 + int(rng.integers(0, spec.classes - 1))) % spec.classes
    return label


def write_split(spec: SyntheticSpec, root: Path, split: str) -> None:
    per_class = spec.train_per_class if split == "train" else spec.val_per_class
    serial = 0
    for label in range(spec.classes):
        folder = root / split / spec.wnid(label)
        folder.mkdir(parents=True)
        for index in range(per_class):
            rng = _image_rng(spec, split, label, index)
            pixels = render(drawn_class(spec, split, label, index, rng), spec.classes, spec.size, rng)
            serial += 1
            name = f"{spec.wnid(label)}_{index}.JPEG" if split == "train" else f"ILSVRC2012_val_{serial:08d}.JPEG"
            (folder / name).write_bytes(jpeg_bytes(pixels, spec.quality))


def marker_text(spec: SyntheticSpec) -> str:
    marker = {"generator": "workloads.resnet50.synthetic", "spec": asdict(spec), "classes": spec.classes,
              "counts": spec.counts()}
    return json.dumps(marker, indent=2, sort_keys=True) + "\n"


def synthesize(spec: SyntheticSpec, out: Path) -> bool:
    """Write the dataset into ``out`` atomically; False when ``out`` already holds exactly it.

    The files go into a temporary sibling folder that is renamed to ``out`` once complete (its
    ready marker written last), so a crash never leaves a half-written dataset at ``out``.
    Raises FileExistsError when ``out`` holds anything else.
    """
    wanted = marker_text(spec)
    marker = out / READY_MARKER
    if marker.is_file() and marker.read_text() == wanted:
        return False
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise FileExistsError(f"{out}: exists and is not this synthetic dataset; choose an empty or new folder")
    with staged_folder(out) as staging:
        for split in ("train", "val"):
            write_split(spec, staging, split)
        (staging / READY_MARKER).write_text(wanted)
    return True
