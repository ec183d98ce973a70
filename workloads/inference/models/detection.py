"""COCO-format detection datasets (COCO 2017 for ssd-resnet34, the MLPerf OpenImages subset for
retinanet) and their accuracy: the reference's ``tools/accuracy-coco.py`` and
``tools/accuracy-openimages.py``, COCO mAP@[0.5:0.95] through pycocotools.

A response is float32 groups of seven, one per detection: ``index, ymin, xmin, ymax, xmax, score,
class`` with the box normalised to [0, 1] (the reference's payload); fewer than seven floats means
no detection.
"""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from workloads.inference.errors import HarnessError
from workloads.inference.models.common import Accuracy, read_image, read_text_file, require_files


@dataclass(frozen=True, kw_only=True)
class Image:
    id: int
    path: Path
    height: int
    width: int


def read_annotations(path: Path) -> dict:
    if not path.exists() and not path.is_symlink():
        raise HarnessError(f"{path}: missing annotation file")
    try:
        data = json.loads(read_text_file(path, "annotation file"))
    except (OSError, ValueError) as exc:
        raise HarnessError(f"{path}: not a readable JSON annotation file ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("images"), list) or not data["images"]:
        raise HarnessError(f"{path}: no 'images' list (a COCO-format annotation file is expected)")
    return data


def list_images(annotations: dict, folders: list[Path], where: Path) -> list[Image]:
    """Every image of the annotation file, in its order, found under the first of ``folders`` that
    holds the first image (the reference's layouts differ by model)."""
    first = annotations["images"][0]["file_name"]
    folder = next((f for f in folders if (f / first).is_file()), folders[0])
    try:
        images = [Image(id=int(i["id"]), path=folder / i["file_name"], height=int(i["height"]), width=int(i["width"]))
                  for i in annotations["images"]]
    except (KeyError, TypeError, ValueError) as exc:
        raise HarnessError(f"{where}: an image entry lacks id, file_name, height or width ({exc})") from None
    require_files([i.path for i in images], f"image (looked in {folder})")
    return images


def payload(index: int, boxes: np.ndarray, scores: np.ndarray, classes: np.ndarray, *, threshold: float,
            box: Callable[[np.ndarray], tuple[float, float, float, float]]) -> np.ndarray:
    """The float32 response of one image: detections in the model's order until the first score
    below ``threshold`` (the reference's loop breaks there), ``box`` mapping the model's box to
    normalised (ymin, xmin, ymax, xmax)."""
    rows = []
    for k in range(len(scores)):
        if scores[k] < threshold:
            break
        rows.append([float(index), *box(boxes[k]), float(scores[k]), float(classes[k])])
    return np.asarray(rows, dtype=np.float32).reshape(-1)


def mean_average_precision(annotation_file: Path, images: list[Image], entries: list[tuple[int, bytes]],
                           *, inverse_map: bool) -> Accuracy:
    """The reference script: boxes scaled to each image's size, class ids mapped through the
    annotation's category ids when ``inverse_map``, evaluated over the images the log holds."""
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    with contextlib.redirect_stdout(io.StringIO()):
        truth = COCO(str(annotation_file))
    inverse = [0, *truth.getCatIds()]
    detections, image_ids = [], set()
    for index, data in entries:
        image = images[index]
        image_ids.add(image.id)
        values = np.frombuffer(data, np.float32)
        for start in range(0, len(values) - len(values) % 7, 7):
            _, ymin, xmin, ymax, xmax, score, label = (float(v) for v in values[start:start + 7])
            category = inverse[int(label)] if inverse_map else int(label)
            ymin, ymax = ymin * image.height, ymax * image.height
            xmin, xmax = xmin * image.width, xmax * image.width
            detections.append({"image_id": image.id, "category_id": category, "score": score,
                               "bbox": [xmin, ymin, xmax - xmin, ymax - ymin]})
    percent = 0.0
    if detections:
        with contextlib.redirect_stdout(io.StringIO()):
            found = truth.loadRes(detections)
            evaluation = COCOeval(truth, found, iouType="bbox")
            evaluation.params.imgIds = sorted(image_ids)
            evaluation.evaluate()
            evaluation.accumulate()
            evaluation.summarize()
        percent = 100.0 * max(float(evaluation.stats[0]), 0.0)
    return Accuracy(metric="mAP", percent=percent, samples=len(entries), line=f"mAP={percent:.3f}%")


class DetectionModel:
    """What the detection models share, as LoadGen's QSL sees a dataset: the images the annotation
    file (``ANNOTATIONS`` under the dataset folder) lists, found under ``folders(data)``, preprocessed
    by the model's ``preprocess``. A subclass sets those and ``respond`` (common.py: the protocol)."""

    NAME: str
    IMAGE_SIZE: tuple[int, int]
    ANNOTATIONS: Path
    INVERSE_MAP: bool
    """Whether the reference's accuracy script maps class ids through the annotation's category ids."""

    def __init__(self, data: Path, *, count: int | None, image_size: tuple[int, int] | None = None,
                 label_offset: int = 0) -> None:
        if label_offset:
            raise HarnessError(f"{self.NAME} takes no label offset")
        self.annotation_file = data / self.ANNOTATIONS
        images = self.images_of(data)
        self.images = images[:count] if count else images
        self.image_size = image_size or self.IMAGE_SIZE

    @classmethod
    def images_of(cls, data: Path) -> list[Image]:
        """Every image of the dataset folder ``data``; HarnessError naming what is missing."""
        return list_images(read_annotations(data / cls.ANNOTATIONS), cls.folders(data), data / cls.ANNOTATIONS)

    @classmethod
    def check(cls, data: Path) -> str:
        """The dataset command line's ``check`` line."""
        return f"ok {data}: {len(cls.images_of(data))} images in {cls.ANNOTATIONS}"

    @staticmethod
    def folders(data: Path) -> list[Path]:
        """Where the images may be, the first that holds the first image winning."""
        raise NotImplementedError

    @staticmethod
    def preprocess(image: np.ndarray, size: tuple[int, int]) -> np.ndarray:
        """The reference's preprocessing of one BGR image (NCHW float32)."""
        raise NotImplementedError

    @property
    def count(self) -> int:
        return len(self.images)

    def load(self, index: int) -> np.ndarray:
        return self.preprocess(read_image(self.images[index].path), self.image_size)

    def respond(self, outputs: Sequence[np.ndarray], indices: Sequence[int]) -> list[np.ndarray]:
        raise NotImplementedError

    def accuracy(self, entries: list[tuple[int, bytes]]) -> Accuracy:
        return mean_average_precision(self.annotation_file, self.images, entries, inverse_map=self.INVERSE_MAP)
