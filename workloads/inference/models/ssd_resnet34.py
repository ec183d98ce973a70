"""ssd-resnet34: COCO 2017 validation at 1200x1200, mAP, as the MLPerf Inference reference runs it
(``coco.py``, ``pre_process_coco_resnet34``, ``PostProcessCocoOnnx``, ``tools/accuracy-coco.py
--use-inv-map``). Retired from MLPerf Inference after v2.0; its settings come from that round's
mlperf.conf (``inference.yaml`` passes them as user.conf values, recorded).

Dataset layout: ``DIR/annotations/instances_val2017.json`` and ``DIR/val2017/<file_name>``.
Preprocessing: BGR to RGB, resized to 1200x1200 (linear), /255, the ImageNet mean and std, NCHW.
The ONNX model gives normalised boxes (xmin, ymin, xmax, ymax), labels 1..80 and scores;
detections below 0.5 are dropped, labels mapped to COCO category ids for scoring.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from workloads.inference.models.common import resized_rgb
from workloads.inference.models.detection import DetectionModel, payload

NAME = "ssd-resnet34"
IMAGE_SIZE = (1200, 1200)
SCORE_THRESHOLD = 0.5
MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)
ANNOTATIONS = Path("annotations") / "instances_val2017.json"


def folders(data: Path) -> list[Path]:
    return [data / "val2017"]


def check(data: Path) -> str:
    return Model.check(data)


def preprocess(image: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """The reference's ``pre_process_coco_resnet34`` (NCHW)."""
    image = (resized_rgb(image, *size) / 255.0 - MEAN) / STD
    return np.ascontiguousarray(image.transpose(2, 0, 1), dtype=np.float32)


CONF_MODEL = "ssd-resnet34"
"""The model's key in mlperf.conf."""
RETIRED_CONF = {"*": {"performance_sample_count_override": 64.0}, "Server": {"target_latency": 100.0}}
"""Per scenario ('*': all), what the v2.0 mlperf.conf (the last to hold ssd-resnet34) gave it beyond
the wildcards; written into user.conf."""
MAX_BATCH = 1
"""Samples per backend call by default (the reference's --max-batchsize for this model)."""


class Model(DetectionModel):
    NAME = NAME
    IMAGE_SIZE = IMAGE_SIZE
    ANNOTATIONS = ANNOTATIONS
    INVERSE_MAP = True
    folders = staticmethod(folders)
    preprocess = staticmethod(preprocess)

    def respond(self, outputs: Sequence[np.ndarray], indices: Sequence[int]) -> list[np.ndarray]:
        boxes, labels, scores = (np.asarray(o) for o in outputs[:3])
        return [payload(indices[i], boxes[i], scores[i], labels[i], threshold=SCORE_THRESHOLD,
                        box=lambda b: (b[1], b[0], b[3], b[2]))
                for i in range(len(indices))]
