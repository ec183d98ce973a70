"""`mltrain data ssd-resnet34 upscale COCO OUT`: COCO upscaled to 1200 x 1200 as MLPerf Inference's
tools/upscale_coco/upscale_coco.py makes it (boxes and areas scaled per image, images resized with
linear interpolation and rewritten), the folder whole or absent; and, with a mlcommons/inference
checkout named by MLPERF_INFERENCE_DIR, byte for byte the reference script's output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import cv2
import pytest

from tests.inference.kits19_reference import ENV
from tests.inference.test_units import coco_folder


def test_upscale_scales_each_box_by_its_images_factors(cli, tmp_path: Path):
    src = coco_folder(tmp_path / "coco")  # three 200 x 100 images, one box each
    r = cli("data", "ssd-resnet34", "upscale", str(src), str(tmp_path / "coco1200"), "--workers", "1")
    assert r.code == 0, r.err
    dataset = json.loads((tmp_path / "coco1200" / "annotations" / "instances_val2017.json").read_text())
    assert [(i["file_name"], i["width"], i["height"]) for i in dataset["images"]] == [
        (f"{k}.jpg", 1200, 1200) for k in range(3)]
    first = dataset["annotations"][0]
    assert first["bbox"] == [20.0 * 6, 10.0 * 12, 100.0 * 6, 50.0 * 12] and first["area"] == 5000.0 * 6 * 12
    assert cv2.imread(str(tmp_path / "coco1200" / "val2017" / "0.jpg")).shape == (1200, 1200, 3)
    before = sorted(p.name for p in (tmp_path / "coco1200" / "val2017").iterdir())
    again = cli("data", "ssd-resnet34", "upscale", str(src), str(tmp_path / "coco1200"))  # its line goes to the tty
    assert again.code == 2 and sorted(p.name for p in (tmp_path / "coco1200" / "val2017").iterdir()) == before
    other = cli("data", "resnet50", "upscale", str(src), str(tmp_path / "x"))  # the training workload's CLI
    assert other.code != 0 and not (tmp_path / "x").exists()


REFERENCE = Path(os.environ.get(ENV, "/nonexistent")) / "tools" / "upscale_coco"


@pytest.mark.skipif(not (REFERENCE / "upscale_coco.py").is_file(),
                    reason=f"{ENV} names no mlcommons/inference checkout")
@pytest.mark.parametrize("fmt", ["jpg", "png"])
def test_upscale_writes_the_reference_scripts_bytes(cli, tmp_path: Path, fmt: str):
    src = coco_folder(tmp_path / "coco")
    reference = REFERENCE
    theirs = tmp_path / "theirs"
    subprocess.run([sys.executable, "upscale_coco.py", "--inputs", str(src), "--outputs", str(theirs), "--size",
                    "1200", "1200", "--format", fmt], cwd=reference, check=True, capture_output=True)
    assert cli("data", "ssd-resnet34", "upscale", str(src), str(tmp_path / "ours"), "--format", fmt).code == 0
    for name in ("annotations/instances_val2017.json", *(f"val2017/{k}.{fmt}" for k in range(3))):
        assert (tmp_path / "ours" / name).read_bytes() == (theirs / name).read_bytes(), name
