"""retinanet: the MLPerf OpenImages subset (264 classes), mAP, as the MLPerf Inference reference runs
it (``openimages.py``, ``pre_process_openimages_retinanet``, ``PostProcessOpenImagesRetinanet`` for
the ONNX model, ``tools/accuracy-openimages.py``).

Dataset layout: ``DIR/annotations/openimages-mlperf.json``; images where its ``file_name`` points,
under ``DIR`` or ``DIR/validation/data``. Preprocessing: BGR to RGB, resized to 800x800 (linear),
divided by 255, NCHW. The ONNX model takes one image and gives boxes (xmin, ymin, xmax, ymax in
input pixels), labels and scores; detections below a score of 0.05 are dropped.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from workloads.inference.models.common import resized_rgb
from workloads.inference.models.detection import DetectionModel, payload

NAME = "retinanet"
IMAGE_SIZE = (800, 800)
SCORE_THRESHOLD = 0.05
ANNOTATIONS = Path("annotations") / "openimages-mlperf.json"


def folders(data: Path) -> list[Path]:
    return [data, data / "validation" / "data"]


def check(data: Path) -> str:
    return Model.check(data)


def preprocess(image: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """The reference's ``pre_process_openimages_retinanet`` (NCHW)."""
    return np.ascontiguousarray((resized_rgb(image, *size) / 255.0).transpose(2, 0, 1), dtype=np.float32)


CONF_MODEL = "retinanet"
"""The model's key in mlperf.conf."""
ROUND = None
"""The rules' round: the installed LoadGen's built-in mlperf.conf (the model is current)."""
TEST01_SAMPLING_TARGET = 256
"""Responses TEST01 logs (the reference's compliance/TEST01/retinanet/audit.config)."""
MAX_BATCH = 1
"""Samples per backend call by default (the reference's --max-batchsize for this model)."""


class Model(DetectionModel):
    NAME = NAME
    IMAGE_SIZE = IMAGE_SIZE
    ANNOTATIONS = ANNOTATIONS
    INVERSE_MAP = False
    folders = staticmethod(folders)
    preprocess = staticmethod(preprocess)

    def respond(self, outputs: Sequence[np.ndarray], indices: Sequence[int]) -> list[np.ndarray]:
        """One image per call (the ONNX model has no batch axis): boxes scaled to [0, 1]."""
        boxes, labels, scores = (np.asarray(o) for o in outputs[:3])
        if boxes.ndim == 2:  # (K, 4): one image
            boxes, labels, scores = boxes[None], labels[None], scores[None]
        height, width = self.image_size
        return [payload(indices[i], boxes[i], scores[i], labels[i], threshold=SCORE_THRESHOLD,
                        box=lambda b: (b[1] / height, b[0] / width, b[3] / height, b[2] / width))
                for i in range(len(indices))]
