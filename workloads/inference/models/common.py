"""What every model module shares: the reference's image reading and resizing (OpenCV, as the
MLPerf reference uses), the accuracy log LoadGen writes, and the accuracy line each script prints.

A model module defines a class ``Model`` with ``NAME``, ``count`` (samples in the dataset as used),
``load(index) -> one sample`` ((3, H, W) float32 for an image), ``respond(outputs, indices) ->
per-sample payloads`` and ``accuracy(entries) -> Accuracy``, and a module function ``check(data)``
that raises HarnessError naming what is wrong with a dataset folder (one line). Optional: a model
that answers one sample with several backend calls (3d-unet's sliding window) defines
``infer(backend, sample, batching) -> payload`` instead of ``respond``; ``check_input(shape)``
refuses a model file whose input does not fit the dataset; ``dataset_facts()`` says what the
facts file records of the dataset (``gap``: why it is not the reference's); a module function
``prepare(src, cache, input_shape, workers) -> folder`` makes the dataset from what ``src`` holds.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import cv2
import numpy as np

from workloads.common.files import file_problem
from workloads.inference.errors import HarnessError

ACCURACY_FILE = "mlperf_log_accuracy.json"


@dataclass(frozen=True, kw_only=True)
class Accuracy:
    """What a model's accuracy script says of LoadGen's accuracy log."""

    metric: str
    """'top1', 'mAP' or 'DICE' (the mean Dice, in percent here)."""
    percent: float
    samples: int
    """Distinct samples the log holds."""
    line: str
    """The line the reference's script prints ('accuracy=76.456%, good=38228, total=50000')."""
    parts: dict[str, float] = field(default_factory=dict)
    """What the line also reports (3d-unet: the kidney and tumour Dice)."""


def read_image(path: Path) -> np.ndarray:
    """(H, W, 3) uint8 BGR, as ``cv2.imread`` gives it; HarnessError naming a file that does not decode."""
    image = cv2.imread(str(path))
    if image is None:
        raise HarnessError(f"{path}: cannot read this image")
    if image.ndim == 2:  # a greyscale file
        image = cv2.cvtColor(image, cv2.COLOR_GRAY2BGR)
    return image


def resize_with_aspect_ratio(image: np.ndarray, height: int, width: int, *, scale: float = 87.5,
                             interpolation: int = cv2.INTER_AREA) -> np.ndarray:
    """The shorter side to ``100 / scale`` of the output side, the aspect ratio kept (the reference's
    ``resize_with_aspectratio``)."""
    h, w = image.shape[:2]
    new_height, new_width = int(100.0 * height / scale), int(100.0 * width / scale)
    size = (new_width, int(new_height * h / w)) if h > w else (int(new_width * w / h), new_height)  # (W, H)
    return cv2.resize(image, size, interpolation=interpolation)


def center_crop(image: np.ndarray, height: int, width: int) -> np.ndarray:
    h, w = image.shape[:2]
    left, top = int((w - width) / 2), int((h - height) / 2)
    return image[top:top + height, left:left + width]


def resized_rgb(image: np.ndarray, height: int, width: int) -> np.ndarray:
    """(H, W, 3) float32 RGB resized to exactly height x width (the reference's ``maybe_resize``)."""
    image = cv2.cvtColor(image.astype(np.float32), cv2.COLOR_BGR2RGB)
    return cv2.resize(image, (width, height), interpolation=cv2.INTER_LINEAR)


def read_text_file(path: Path, what: str) -> str:
    """A dataset's text file (a list, an annotation file) as UTF-8 text, a byte-order mark dropped (an
    editor's "UTF-8 with BOM" made the first image name unfindable); HarnessError naming the file,
    the line and the byte where it is not UTF-8, or what it is where it is no file (never read: a FIFO
    would block)."""
    if (problem := file_problem(path)) is not None:
        raise HarnessError(f"{path}: the {what}: {problem}")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise HarnessError(f"{path}: cannot read the {what} ({exc.strerror or exc})") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise HarnessError(f"{path}: the {what} is not UTF-8 text (byte 0x{data[exc.start]:02x} on line {line}): "
                           "save it as UTF-8") from None


def read_accuracy_log(path: Path) -> list[tuple[int, bytes]]:
    """(sample index, response bytes) of every entry of LoadGen's accuracy log, first entry of a
    sample only (the reference scripts de-duplicate the same way)."""
    try:
        entries = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise HarnessError(f"{path}: unreadable LoadGen accuracy log ({exc})") from None
    seen: dict[int, bytes] = {}
    for entry in entries:
        seen.setdefault(int(entry["qsl_idx"]), bytes.fromhex(entry["data"]))
    return sorted(seen.items())


def require_files(paths: list[Path], what: str) -> None:
    """Every one of ``paths`` is a file (a stat each: 50,000 take well under a second on a local
    disk), so that a missing one is bad input found before LoadGen starts, never inside it."""
    problems = [(p, problem) for p in paths if not p.is_file() and (problem := file_problem(p)) is not None]
    if problems:
        (first, problem), more = problems[0], len(problems) - 1
        said = f"missing {what}" if problem == "missing file" else f"{what}: {problem}"
        raise HarnessError(f"{first}: {said}{f' (and {more} more)' if more else ''}")
