"""The ImageNet folder layout: ``<root>/{train,val}/<wnid>/*.JPEG``; what a complete set holds.

Everything that walks a dataset folder (the trainer, ``check``, ``verify``) lists it through here,
so they agree on what counts as an image and as a class.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from PIL import Image, UnidentifiedImageError

from workloads.resnet50.errors import LayoutError

SPLITS = ("train", "val")
IMAGE_SUFFIXES = (".jpeg", ".jpg", ".png")
READY_MARKER = ".mltrain-ready"
"""Written last into a complete synthetic dataset; holds its generator arguments and counts."""

DECODE_ERRORS = (OSError, UnidentifiedImageError, SyntaxError, ValueError, Image.DecompressionBombError)
"""What PIL raises for a file that is not a decodable image."""

IMAGENET_CLASSES = 1000
IMAGENET_COUNTS = {"train": 1_281_167, "val": 50_000}
"""ImageNet 2012 (ILSVRC2012) images per split."""


@dataclass(frozen=True, kw_only=True)
class Split:
    """The images of one split, in a deterministic order."""

    name: str
    """'train' or 'val'."""
    classes: tuple[str, ...]
    """Class folder names (wnids), sorted; a label is an index into this tuple."""
    samples: tuple[tuple[Path, int], ...]
    """(image path, label) pairs, sorted by class then file name."""


def is_image(name: str) -> bool:
    return name.lower().endswith(IMAGE_SUFFIXES) and not name.startswith(".")


def class_folders(root: Path, split: str) -> list[str]:
    folder = root / split
    if not folder.is_dir():
        raise LayoutError(f"{folder}: missing split folder (expected {split}/<class>/*.JPEG)")
    names = sorted(entry.name for entry in os.scandir(folder) if entry.is_dir() and not entry.name.startswith("."))
    if not names:
        loose = any(is_image(entry.name) for entry in os.scandir(folder))
        hint = " (images must be sorted into one folder per class)" if loose else ""
        raise LayoutError(f"{folder}: no class folders{hint}")
    return names


def list_split(root: Path, split: str, classes: tuple[str, ...] | None = None) -> Split:
    """List one split; ``classes`` (the training classes) fixes the label order for ``val``."""
    found = class_folders(root, split)
    if classes is None:
        classes = tuple(found)
    elif set(found) != set(classes):
        extra = sorted(set(found) - set(classes))
        missing = sorted(set(classes) - set(found))
        what = f"class {extra[0]!r} is not in train/" if extra else f"class {missing[0]!r} is missing"
        raise LayoutError(f"{root / split}: {what} ({len(found)} classes here, {len(classes)} in train/)")
    samples: list[tuple[Path, int]] = []
    for label, name in enumerate(classes):
        folder = root / split / name
        files = sorted(entry.name for entry in os.scandir(folder) if entry.is_file() and is_image(entry.name))
        if not files:
            raise LayoutError(f"{folder}: empty class folder (no .JPEG images)")
        samples += [(folder / file, label) for file in files]
    return Split(name=split, classes=classes, samples=tuple(samples))


def list_dataset(root: Path) -> tuple[Split, Split]:
    """Both splits, with the validation labels in the training class order."""
    if not root.is_dir():
        raise LayoutError(f"{root}: no such dataset folder")
    train = list_split(root, "train")
    return train, list_split(root, "val", train.classes)


def read_marker(root: Path) -> dict | None:
    """The ready marker of a synthetic dataset, or None when there is none (real ImageNet)."""
    path = root / READY_MARKER
    if not path.is_file():
        return None
    try:
        marker = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise LayoutError(f"{path}: unreadable ready marker ({exc})") from None
    if not isinstance(marker, dict) or not isinstance(marker.get("counts"), dict):
        raise LayoutError(f"{path}: ready marker has no 'counts' mapping")
    return marker


def expected_counts(root: Path) -> tuple[int, dict[str, int]]:
    """(classes, images per split) a complete dataset in ``root`` must have."""
    marker = read_marker(root)
    if marker is None:
        return IMAGENET_CLASSES, dict(IMAGENET_COUNTS)
    counts = marker["counts"]
    return int(marker["classes"]), {split: int(counts[split]) for split in SPLITS}
