"""resnet50: ImageNet 2012 validation, top-1, as the MLPerf Inference reference runs it
(``vision/classification_and_detection``: ``imagenet.py``, ``pre_process_vgg``, ``PostProcessCommon``,
``tools/accuracy-imagenet.py``).

Dataset layout (the reference's): ``DIR/val_map.txt``, one line per image, ``<path relative to DIR>
<label>``. Preprocessing: BGR to RGB, the shorter side resized to 256 (87.5%) with INTER_AREA, a
224x224 centre crop, the means (123.68, 116.78, 103.94) subtracted, NCHW. The reference ONNX model
(converted from TensorFlow) has 1001 classes, 0 the background: its class ids are shifted by -1.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import cv2
import numpy as np

from workloads.inference.errors import HarnessError
from workloads.inference.models.common import (
    Accuracy,
    center_crop,
    read_image,
    read_text_file,
    require_files,
    resize_with_aspect_ratio,
)

NAME = "resnet50"
IMAGE_SIZE = (224, 224)
MEANS = np.array([123.68, 116.78, 103.94], dtype=np.float32)
LABEL_OFFSET = -1
"""Added to the model's class id (the reference's ``PostProcessCommon(offset=-1)``)."""
VAL_MAP = "val_map.txt"


def read_val_map(data: Path) -> list[tuple[str, int]]:
    """(relative image path, label) per line of ``DIR/val_map.txt``; HarnessError naming the line."""
    path = data / VAL_MAP
    if not path.exists() and not path.is_symlink():
        raise HarnessError(f"{path}: missing (resnet50 data is DIR/val_map.txt listing '<image> <label>' per line)")
    items = []
    for number, line in enumerate(read_text_file(path, VAL_MAP).splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 2 or not parts[1].lstrip("-").isdigit():
            raise HarnessError(f"{path}: line {number}: expected '<image> <label>', got {line.strip()!r}")
        items.append((parts[0], int(parts[1])))
    if not items:
        raise HarnessError(f"{path}: lists no image")
    return items


def check(data: Path) -> str:
    """The layout, and that every listed image is there; the line that says it passed."""
    items = read_val_map(data)
    require_files([data / name for name, _ in items], "image listed in val_map.txt")
    return f"ok {data}: {len(items)} images in val_map.txt"


def preprocess(image: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """The reference's ``pre_process_vgg`` (NCHW): (3, H, W) float32."""
    height, width = size
    image = cv2.cvtColor(image, cv2.COLOR_BGR2RGB)
    image = resize_with_aspect_ratio(image, height, width, interpolation=cv2.INTER_AREA)
    image = np.asarray(center_crop(image, height, width), dtype=np.float32) - MEANS
    return np.ascontiguousarray(image.transpose(2, 0, 1))
CONF_MODEL = "resnet50"
"""The model's key in mlperf.conf."""
ROUND = None
"""The rules' round: the installed LoadGen's built-in mlperf.conf (the model is current)."""
TEST01_SAMPLING_TARGET = 4096
"""Responses TEST01 logs (the reference's compliance/TEST01/resnet50/audit.config)."""
MAX_BATCH = 32
"""Samples per backend call by default (the reference's --max-batchsize for this model)."""



class Model:
    """The resnet50 dataset as LoadGen's QSL sees it, and what a response holds: the class id as float32."""

    NAME = NAME
    IMAGE_SIZE = IMAGE_SIZE

    def __init__(self, data: Path, *, count: int | None, image_size: tuple[int, int] = IMAGE_SIZE,
                 label_offset: int = LABEL_OFFSET) -> None:
        self.data = data
        self.items = read_val_map(data)[:count] if count else read_val_map(data)
        self.image_size = image_size
        self.label_offset = label_offset

    @property
    def count(self) -> int:
        return len(self.items)

    def load(self, index: int) -> np.ndarray:
        return preprocess(read_image(self.data / self.items[index][0]), self.image_size)

    def respond(self, outputs: Sequence[np.ndarray], indices: Sequence[int]) -> list[np.ndarray]:
        """The class id of each sample (argmax of logits, or the model's own ArgMax output), offset."""
        batch = len(indices)
        first = np.asarray(outputs[0])
        classes = first.reshape(batch) if first.ndim <= 1 or first.shape[-1] == 1 else first.argmax(axis=-1)
        return [np.array([int(c) + self.label_offset], dtype=np.float32) for c in classes.reshape(batch)]

    def accuracy(self, entries: list[tuple[int, bytes]]) -> Accuracy:
        """``tools/accuracy-imagenet.py``: the first float32 of each response against val_map.txt."""
        good = sum(1 for index, data in entries if int(np.frombuffer(data, np.float32)[0]) == self.items[index][1])
        total = len(entries)
        percent = 100.0 * good / total if total else 0.0
        return Accuracy(metric="top1", percent=percent, samples=total,
                        line=f"accuracy={percent:.3f}%, good={good}, total={total}")
