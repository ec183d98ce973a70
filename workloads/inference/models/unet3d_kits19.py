"""3d-unet: KiTS19 kidney and tumour segmentation, mean Dice, as the MLPerf Inference reference runs
it (``vision/medical_imaging/3d-unet-kits19``: ``kits_QSL.py``, ``base_SUT.py``, ``inference_utils.py``,
``accuracy_kits.py``).

Dataset: a folder prepared from raw KiTS19 (`workloads.inference.kits19.prepare`: the reference's
preprocessing, its ``case_XXXXX.pkl`` files and an index). A sample is one whole case, its
image (1, D, H, W) float32 already cropped and padded to a whole number of half-ROI strides.

Inference is the training workload's sliding window, which is also the inference reference's, run in
NumPy as the inference reference runs it (`workloads.unet3d.windows.numpy_sliding_window_logits`: the
harness imports no torch on ONNX Runtime), held bit for bit equal to the training workload's torch
one (`workloads.unet3d.evaluate.sliding_window_logits`, byte-identical to the training reference's):
windows of the ROI at every half-ROI stride in the same order, each window's logits weighted by the same Gaussian
importance map (sigma 0.125 of the side, cube root, normalised to 1) and summed in float32, divided
by the summed weights. On the inference reference's already padded volumes its own padding and crop
are empty. Then, as the inference reference (and not the training one, which scores the logits on
the device): the argmax over the classes, one uint8 per voxel, is the response LoadGen logs.
Windows go to the backend up to ``max_batch`` at a time (the reference: one at a time; the same
sums, in the same order).

Accuracy: the reference's ``accuracy_kits.py``: per case the Dice of kidney (class 1) and tumour
(class 2) of the argmax against the preprocessed label over the whole padded volume, (2 |P n T| +
1e-6) / (|P| + |T| + 1e-6) in float64, their mean the case's composite; the means over the cases,
printed as the reference prints them (``Accuracy: mean = 0.86170, kidney = 0.9347, tumor = 0.7887``).
The training workload scores in float32 on the trimmed, unpadded volume: not this.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from workloads.inference.errors import HarnessError
from workloads.inference.kits19.prepare import prepare as prepare_folder
from workloads.inference.kits19.prepare import read_index
from workloads.inference.kits19.preprocess import OVERLAP, read_case
from workloads.inference.models.common import Accuracy
from workloads.unet3d.windows import numpy_sliding_window_logits, padding

NAME = "3d-unet"
CONF_MODEL = "3d-unet"
"""The model's key in mlperf.conf."""
ROUND = None
"""The rules' round: the installed LoadGen's built-in mlperf.conf (the model is current)."""
TEST01_SAMPLING_TARGET = 64
"""Responses TEST01 logs (the reference's compliance/TEST01/3d-unet/audit.config)."""
MAX_BATCH = 1
"""Windows per backend call by default: the reference runs one at a time."""
WARM_UP_CALLS = (2, 0)
"""One whole volume to warm up, one timed: a sample is a case."""
KIDNEY, TUMOUR = 1, 2
ARGMAX_SLAB_VOXELS = 1 << 22
"""Voxels per step of the segmentation's argmax (its int64 indices: 32 MiB)."""
SMOOTH = 1e-6


def check(data: Path) -> str:
    index = read_index(data)
    return f"ok {data}: {len(index['cases'])} KiTS19 inference cases for a {_dims(index['roi'])} window"


def prepare(src: Path, cache: Path, input_shape: Sequence[int] | None, workers: int) -> Path:
    """The dataset command line's ``prepare``: the folder the harness runs on (see kits19.prepare);
    the ROI is the model's window (its input's spatial axes), the reference's without one."""
    roi = tuple(input_shape[1:]) if input_shape and len(input_shape) == 4 else None
    prepared = prepare_folder(src, cache, **({"roi": roi} if roi else {}), workers=workers)
    return prepared.folder


def dice(prediction: np.ndarray, label: np.ndarray) -> tuple[float, float]:
    """(kidney, tumour) Dice of one case, the reference's ``get_dice_score``: its float64 sums of one-hot
    maps are whole numbers, so counts give the same values."""
    scores = []
    for cls in (KIDNEY, TUMOUR):
        predicted, target = prediction == cls, label == cls
        both = int(np.count_nonzero(predicted & target))
        scores.append((2.0 * both + SMOOTH) / (int(np.count_nonzero(target)) + int(np.count_nonzero(predicted))
                                               + SMOOTH))
    return scores[0], scores[1]


def summary_line(mean: float, kidney: float, tumour: float) -> str:
    """What the reference's script prints (and the submission checker reads)."""
    return f"Accuracy: mean = {mean:.5f}, kidney = {kidney:.4f}, tumor = {tumour:.4f}"


class Model:
    """The prepared KiTS19 cases as LoadGen's QSL sees them, one whole volume per sample."""

    NAME = NAME

    def __init__(self, data: Path, *, count: int | None, image_size: tuple[int, int] | None = None,
                 label_offset: int = 0) -> None:
        if image_size is not None or label_offset:
            raise HarnessError("3d-unet takes neither --image-size nor --label-offset (its window is the dataset's "
                               "ROI)")
        self.data = data
        self.index = read_index(data)
        self.cases = self.index["cases"][:count] if count else self.index["cases"]
        self.roi = tuple(int(v) for v in self.index["roi"])

    @property
    def count(self) -> int:
        return len(self.cases)

    def dataset_facts(self) -> dict[str, Any]:
        """What harness.json records of the dataset, and why it is not the reference's when it is not."""
        index = self.index
        gap = None
        if not index.get("reference_data"):
            gap = ("the dataset is not the real KiTS19 at the reference's ROI: not checked against the reference's "
                   "checksums")
        elif not index.get("verified"):
            bad = index.get("checksum_mismatches") or []
            gap = (f"{len(bad)} of {len(index['cases'])} cases differ from the reference's checksums "
                   f"({', '.join(bad[:3])}{', ...' if len(bad) > 3 else ''})")
        return {"cases": self.count, "roi": list(self.roi), "reference_data": bool(index.get("reference_data")),
                "verified": bool(index.get("verified")), "checksum_mismatches": index.get("checksum_mismatches", []),
                "gap": gap}

    def check_input(self, input_shape: Sequence[Any]) -> None:
        """The model's window must be the ROI the dataset was prepared for."""
        spatial = tuple(input_shape[2:])
        if len(input_shape) != 5 or (all(isinstance(d, int) for d in spatial) and spatial != self.roi):
            raise HarnessError(f"the model takes {_dims(input_shape)}, the dataset {self.data} was prepared for "
                               f"a {_dims(self.roi)} window: prepare the raw KiTS19 folder for this model")

    def cost(self, index: int) -> float:
        """The windows the sliding window runs on the case (its index's shape): what a case costs."""
        shape = tuple(int(v) for v in self.cases[index]["shape"][-3:])
        strides = tuple(int(w * (1 - OVERLAP)) for w in self.roi)
        pads = padding(shape, self.roi, strides)
        axes = zip(shape, pads, self.roi, strides, strict=True)
        return float(math.prod(len(range(0, size + before + after - w + 1, stride))
                               for size, (before, after), w, stride in axes))

    def load(self, index: int) -> np.ndarray:
        image, _ = read_case(self.data / self.cases[index]["file"])
        return image

    def infer(self, backend: Any, image: np.ndarray, batching: Any) -> np.ndarray:
        """The case's segmentation (argmax per voxel, uint8, D*H*W bytes), windows through ``batching``."""

        def network(windows: np.ndarray) -> np.ndarray:  # (n, 1, *roi) -> (n, 3, *roi), through the backend
            return batching.predict(backend, windows)[0]

        logits = numpy_sliding_window_logits(network, image[None], self.roi, OVERLAP, batch=batching.max_batch)[0]
        # the argmax a slab at a time: NumPy's is int64, 8 bytes a voxel for the whole volume at once
        segmentation = np.empty(logits.shape[1:], np.uint8)
        step = max(1, ARGMAX_SLAB_VOXELS // max(1, int(np.prod(logits.shape[2:]))))
        for start in range(0, logits.shape[1], step):
            segmentation[start:start + step] = np.argmax(logits[:, start:start + step], axis=0)
        del logits
        return segmentation.reshape(-1)

    def respond(self, outputs: Sequence[np.ndarray], indices: Sequence[int]) -> list[np.ndarray]:
        raise NotImplementedError("3d-unet answers a whole volume per sample (infer)")

    def accuracy(self, entries: list[tuple[int, bytes]]) -> Accuracy:
        """The reference's ``accuracy_kits.py`` over the cases the log holds."""
        kidneys, tumours = [], []
        for index, data in entries:
            _, label = read_case(self.data / self.cases[index]["file"])
            prediction = np.frombuffer(data, np.uint8)
            if prediction.size != label.size:
                raise HarnessError(f"{self.cases[index]['case']}: the accuracy log holds {prediction.size} voxels, "
                                   f"its label {label.size}")
            kidney, tumour = dice(prediction.reshape(label.shape), label)
            kidneys.append(kidney)
            tumours.append(tumour)
        composite = [np.mean([k, t]) for k, t in zip(kidneys, tumours, strict=True)]
        mean, kidney, tumour = (float(np.mean(v)) if v else 0.0 for v in (composite, kidneys, tumours))
        return Accuracy(metric="DICE", percent=100.0 * mean, samples=len(entries),
                        line=summary_line(mean, kidney, tumour), parts={"kidney": kidney, "tumor": tumour})


def _dims(shape: Sequence[Any]) -> str:
    return "x".join(str(d) for d in shape)
