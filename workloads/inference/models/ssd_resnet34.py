"""ssd-resnet34: COCO 2017 validation at 1200x1200, mAP, as the MLPerf Inference reference runs it
(``coco.py``, ``pre_process_coco_resnet34``, ``PostProcessCocoOnnx``, ``tools/accuracy-coco.py
--use-inv-map``). Retired from MLPerf Inference after v2.0; every setting comes from that round's
mlperf.conf (``ROUND``, applied over the installed LoadGen's built-in copy and recorded as official).

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
from workloads.inference.settings import Round

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
ROUND = Round(name="v2.0", source="the mlperf.conf of MLPerf Inference v2.0 (mlcommons/inference tag v2.0), "
              "the last round with ssd-resnet34", values={
                  "*": {"performance_sample_count_override": 64, "qsl_rng_seed": 6655344265603136530,
                        "sample_index_rng_seed": 15863379492028895792, "schedule_rng_seed": 12662793979680847247},
                  "SingleStream": {"target_latency_percentile": 90, "min_duration": 600000, "min_query_count": 1024},
                  "MultiStream": {"target_latency_percentile": 99, "samples_per_query": 8, "min_duration": 600000,
                                  "min_query_count": 270336, "target_latency": 528},
                  "Server": {"target_latency_percentile": 99, "min_duration": 600000, "min_query_count": 270336,
                             "target_latency": 100},
                  "Offline": {"min_duration": 600000, "min_query_count": 24576}})
"""Every value v2.0's mlperf.conf gave ssd-resnet34 (its wildcards and its own lines): its seeds,
minimums, percentiles, Server latency bound and performance sample count, all from that one round."""
UPSCALE_SIZE = (1200, 1200)
"""COCO upscaled to this (W, H) by `mltrain data ssd-resnet34 upscale COCO OUT`, as the reference's
upscale_coco.py makes its coco-1200 dataset."""
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
