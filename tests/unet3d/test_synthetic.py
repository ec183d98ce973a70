"""Synthetic KiTS19-like generator: determinism, layout, spacing, anatomy, sizes."""

from __future__ import annotations

import json
from pathlib import Path

import nibabel
import numpy as np
import pytest
from scipy import ndimage

from workloads.common.errors import DataError
from workloads.unet3d.preprocess import preprocess_case
from workloads.unet3d.raw_check import verify_raw
from workloads.unet3d.synthetic import generate_case, parse_size
from workloads.unet3d.synthetic_raw import generate_raw

SMALL = parse_size("40,48,48")


def test_same_seed_same_case_other_seed_other_case() -> None:
    first, again = generate_case(3, 11, SMALL), generate_case(3, 11, SMALL)
    np.testing.assert_array_equal(first.image, again.image)
    np.testing.assert_array_equal(first.label, again.label)
    assert first.spacing == again.spacing
    other = generate_case(3, 12, SMALL)
    assert other.image.shape != first.image.shape or not np.array_equal(other.image, first.image)


@pytest.mark.parametrize("index", range(6))
def test_case_anatomy_is_ct_like_and_separable(index: int) -> None:
    case = generate_case(index, 5, SMALL)
    slice_mm, row_mm, col_mm = case.spacing
    assert 0.5 <= slice_mm <= 5.0 and 0.5 <= row_mm <= 1.0 and row_mm == col_mm
    assert case.image.dtype == np.int16 and case.label.dtype == np.uint8
    assert set(np.unique(case.label)) == {0, 1, 2}
    assert case.image[0, 0, 0] < -900  # air outside the body
    kidney = np.median(case.image[case.label == 1])
    tumour = np.median(case.image[case.label == 2])
    background = case.image[case.label == 0]
    assert 150 <= kidney <= 250
    assert 60 <= tumour <= kidney - 40  # darker than kidney, brighter than fat
    assert np.mean(np.abs(background - kidney) < 40) < 0.05  # few background voxels look like kidney
    # Two kidneys, one on each side of the body (image columns), tumours attached to a kidney.
    width = case.label.shape[2]
    assert (case.label[:, :, : width // 2] > 0).any() and (case.label[:, :, width // 2 :] > 0).any()
    components, count = ndimage.label(case.label > 0)
    assert count == 2 or (count > 2 and np.bincount(components.ravel())[3:].max() < 30)
    tumour_components, _ = ndimage.label(case.label == 2)
    grown = ndimage.binary_dilation(tumour_components > 0, iterations=2)
    assert (case.label[grown] == 1).any()
    assert case.tumour_sides and set(case.tumour_sides) <= {"left", "right"}


def test_foreground_share_is_reasonable() -> None:
    shares = [np.mean(generate_case(i, 2, SMALL).label > 0) for i in range(5)]
    assert all(0.005 < share < 0.15 for share in shares)


def test_written_layout_verifies_and_headers_hold_the_spacing(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    entries = generate_raw(raw, cases=3, seed=4, size=parse_size("tiny"), workers=1)
    assert [entry["case_id"] for entry in entries] == ["case_00000", "case_00001", "case_00002"]
    assert verify_raw(raw) == ["case_00000", "case_00001", "case_00002"]
    kits = json.loads((raw / "kits.json").read_text())
    assert [entry["case_id"] for entry in kits] == ["case_00000", "case_00001", "case_00002"]
    case = generate_case(1, 4, parse_size("tiny"))
    image = nibabel.load(raw / "case_00001" / "imaging.nii.gz")
    assert image.header["pixdim"][1:4].tolist() == list(case.spacing)
    assert image.shape == case.image.shape
    np.testing.assert_array_equal(np.asanyarray(image.dataobj), case.image)
    label = nibabel.load(raw / "case_00001" / "segmentation.nii.gz")
    np.testing.assert_array_equal(np.asanyarray(label.dataobj), case.label)


def test_requested_size_is_the_shape_after_preprocessing(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    generate_raw(raw, cases=3, seed=9, size=SMALL, workers=1)
    out = tmp_path / "out"
    out.mkdir()
    for index in range(3):
        entry = preprocess_case(raw / f"case_{index:05d}", out, min_shape=1)
        depth, height, width = entry["shape"][1:]
        assert abs(depth - 40) <= 2 and abs(height - 48) <= 2 and abs(width - 48) <= 2, entry["shape"]


def test_real_size_has_512_in_plane() -> None:
    case = generate_case(0, 1, parse_size("real"))
    slices, rows, cols = case.image.shape
    assert (rows, cols) == (512, 512)
    assert 120 <= slices * case.spacing[0] <= 262  # a 12-26 cm long scan


@pytest.mark.parametrize("text", ["huge", "1,2", "64,64,x", "4,64,64"])
def test_bad_sizes_are_rejected(text: str) -> None:
    with pytest.raises(DataError, match="--size"):
        parse_size(text)


def test_presets() -> None:
    assert parse_size("tiny").preprocessed_shape == (24, 32, 32)
    assert parse_size("small").preprocessed_shape == (64, 64, 64)
    assert parse_size("real").preprocessed_shape is None
    assert parse_size("32,40,48").preprocessed_shape == (32, 40, 48)


def test_tumour_contrast_darkens_only_the_tumour_and_default_is_unchanged() -> None:
    default, explicit = generate_case(2, 5, SMALL), generate_case(2, 5, SMALL, tumour_contrast=1.0)
    np.testing.assert_array_equal(default.image, explicit.image)
    easier = generate_case(2, 5, SMALL, tumour_contrast=2.0)
    np.testing.assert_array_equal(easier.label, default.label)
    tumour = default.label == 2
    assert np.median(easier.image[tumour]) < np.median(default.image[tumour]) - 50
    far = ndimage.binary_dilation(tumour, iterations=6)  # blur reaches only a few voxels
    np.testing.assert_array_equal(easier.image[~far], default.image[~far])


def test_tumour_contrast_is_recorded_only_when_not_default(tmp_path: Path) -> None:
    from workloads.unet3d.synthesize import SynthesizeConfig

    assert "tumour_contrast" not in SynthesizeConfig(cases=4, workers=1).record()
    assert SynthesizeConfig(cases=4, workers=1, tumour_contrast=2.0).record()["tumour_contrast"] == 2.0
    with pytest.raises(DataError):
        SynthesizeConfig(cases=4, workers=1, tumour_contrast=0.0)
    entries = generate_raw(tmp_path / "raw", 2, 1, parse_size("16,16,16"), tumour_contrast=1.5)
    assert all(entry["tumour_contrast"] == 1.5 for entry in entries)
