"""3D-UNet against the MLPerf Inference reference itself, on the same synthetic raw KiTS19 cases and the
same ONNX model: our preprocessed cases are the reference's (values, and the file bytes its NumPy 1.x
environment writes), our responses its SUT's sliding window byte for byte, and our accuracy line its
accuracy_kits.py's on our LoadGen accuracy log. Needs a checkout of mlcommons/inference named by
MLPERF_INFERENCE_DIR (nothing of it is copied here) and the `reference` extra (pandas, for its accuracy
script); skipped without a checkout."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.inference.kits19_reference import ENV, classifier, compare, reference_dir
from workloads.inference.kits19.prepare import prepare
from workloads.unet3d.synthetic import parse_size
from workloads.unet3d.synthetic_raw import generate_raw

pytestmark = [pytest.mark.slow,  # about a minute: four cases of 128 x 192 x 192 through both pipelines
              pytest.mark.skipif(reference_dir() is None, reason=f"{ENV} names no mlcommons/inference checkout")]


def test_inputs_responses_and_dice_equal_the_references(tmp_path: Path):
    raw = tmp_path / "raw"
    generate_raw(raw, 7, 0, parse_size("150,180,200"), workers=1)  # 4 inference cases, 4 windows each
    model = classifier(tmp_path / "nearest.onnx", prepare(raw, tmp_path / "work" / "cache", workers=1).folder)
    parity = compare(reference_dir(), raw, model, tmp_path / "work")
    assert [c.case for c in parity.cases] == ["case_00000", "case_00003", "case_00005", "case_00006"]
    assert all(c.arrays_equal and c.bytes_equal and c.segmentation_equal for c in parity.cases), parity.cases
    assert any(c.shape[2] > 128 for c in parity.cases)  # windows overlap: the blending is compared too
    assert parity.our_line == parity.their_line and parity.our_line.startswith("Accuracy: mean = ")
    for ours_kidney, their_kidney, ours_tumour, their_tumour in parity.per_case.values():
        assert ours_kidney == their_kidney and ours_tumour == their_tumour
    assert 0.2 < next(iter(parity.per_case.values()))[0] < 0.99  # a segmentation, not all or nothing
