"""COCO upscaled for ssd-resnet34, as MLPerf Inference's ``tools/upscale_coco/upscale_coco.py`` makes it
(``--size 1200 1200``): every image read by OpenCV, resized to the size with linear interpolation and
written in the format asked for (its extension replaced: OpenCV's JPEG at its default quality, or PNG);
every annotation's box scaled by the image's own factors (x by width, y by height) and its area by
both; the annotation file written with the images and annotations in their order, through ``json.dump``.

    OUT/<images>/<name>.<format>, OUT/<annotations>   (the same layout as the input)

The output folder is made in a sibling and renamed when complete; images are resized in parallel.
JPEG loses detail: the reference's note says up to 0.5 mAP; PNG keeps it.
"""

from __future__ import annotations

import json
from pathlib import Path

import cv2

from workloads.common.atomic import staged_folder
from workloads.inference.errors import HarnessError
from workloads.inference.models.common import require_files
from workloads.unet3d.parallel import map_unordered

IMAGES = "val2017"
ANNOTATIONS = Path("annotations") / "instances_val2017.json"
FORMATS = ("jpg", "png")


def renamed(file_name: str, fmt: str) -> str:
    """The reference's rename: the last three characters (the extension) replaced by the format."""
    return file_name[0:-3] + fmt


def _image(source: Path, target: Path, size: tuple[int, int]) -> str:
    image = cv2.imread(str(source))
    if image is None:
        raise HarnessError(f"{source}: cannot read this image")
    if len(image.shape) < 3 or image.shape[2] != 3:
        image = cv2.cvtColor(image, cv2.COLOR_GRAY2RGB)
    if not cv2.imwrite(str(target), cv2.resize(image, size, interpolation=cv2.INTER_LINEAR)):
        raise HarnessError(f"{target}: OpenCV could not write it")
    return target.name


def upscale(src: Path, out: Path, *, size: tuple[int, int] = (1200, 1200), fmt: str = "jpg", images: str = IMAGES,
            annotations: Path = ANNOTATIONS, workers: int = 1) -> int:
    """Write the upscaled dataset of ``src`` into ``out`` (new, or an empty folder); the images written."""
    if fmt not in FORMATS:
        raise HarnessError(f"--format {fmt!r}: jpg or png")
    if min(size) < 1:
        raise HarnessError(f"--size {size[0]} {size[1]}: give a width and a height of at least 1")
    annotation_file = src / annotations
    try:
        dataset = json.loads(annotation_file.read_text())
        entries, boxes = dataset["images"], dataset["annotations"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise HarnessError(f"{annotation_file}: not a readable COCO annotation file ({exc})") from None
    if out.exists() and any(out.iterdir()):
        raise HarnessError(f"{out}: exists and is not empty; choose a new folder")
    by_id = {image["id"]: image for image in entries}
    scaled = []
    for box in boxes:  # the reference scales annotations first, from the original sizes
        image = by_id[box["image_id"]]
        sx, sy = size[0] / image["width"], size[1] / image["height"]
        bb = box["bbox"]
        bb[0], bb[1], bb[2], bb[3] = bb[0] * sx, bb[1] * sy, bb[2] * sx, bb[3] * sy
        box["area"] = box["area"] * sx * sy
        scaled.append(box)
    require_files([src / images / image["file_name"] for image in entries], f"image listed in {annotations}")
    with staged_folder(out) as staging:
        (staging / images).mkdir(parents=True)
        (staging / annotations).parent.mkdir(parents=True, exist_ok=True)
        jobs = [(src / images / image["file_name"], staging / images / renamed(image["file_name"], fmt), size)
                for image in entries]
        written = sum(1 for _ in map_unordered(_image, jobs, workers))
        for image in entries:
            image["file_name"] = renamed(image["file_name"], fmt)
            image["width"], image["height"] = size
        dataset["annotations"] = scaled  # the boxes scaled in place, as a list (as the reference writes them)
        with (staging / annotations).open("w") as handle:
            json.dump(dataset, handle)
    return written
