"""Preprocessing: properties and pinned bytes of known tiny inputs, resume, parallelism, bad data."""

from __future__ import annotations

import hashlib
from pathlib import Path

import nibabel
import numpy as np
import pytest

from workloads.common.errors import DataError
from workloads.unet3d.preprocess import (
    PreprocessConfig,
    preprocess_case,
    preprocess_dataset,
    read_manifest,
)
from workloads.unet3d.synthetic import SyntheticCase
from workloads.unet3d.synthetic_raw import write_case

SPACING = (2.5, 0.8, 0.8)  # mm: resampled to int(2.5/1.6*5), int(0.8/1.2*9), int(0.8/1.2*11) = 7, 6, 7
NORM_LOW, NORM_HIGH = (-79.0 - 101.0) / 76.9, (304.0 - 101.0) / 76.9


def known_case(name: str = "case_00000", spacing=SPACING, shape=(5, 9, 11)) -> SyntheticCase:
    """A fixed tiny case: HU ramps from -150 to 349 (crossing both clip limits), striped labels."""
    i, j, k = np.indices(shape)
    image = ((i * 7 + j * 13 + k * 29) % 500 - 150).astype(np.int16)
    label = ((i + j // 3 + k // 4) % 3).astype(np.uint8)
    return SyntheticCase(name=name, image=image, label=label, spacing=spacing, tumour_sides=())


def md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


@pytest.fixture()
def raw(tmp_path: Path) -> Path:
    folder = tmp_path / "raw"
    write_case(folder, known_case())
    return folder


def test_known_case_bytes_are_pinned(raw: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    entry = preprocess_case(raw / "case_00000", out, min_shape=8)
    # Bytes of the spec's procedure with torch 2.13 / numpy 2.4 / nibabel 5.4; a change means a
    # dependency changed the arithmetic (trilinear interpolation first) and must be looked at.
    assert md5(out / "case_00000_x.npy") == "d8076665ac3e4a293cad2c6c653bf0ad"
    assert md5(out / "case_00000_y.npy") == "5e1c32be78f18f3ca5e41dd8721547f3"
    assert entry["outputs"]["case_00000_x.npy"]["md5"] == md5(out / "case_00000_x.npy")


def test_known_case_properties(raw: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    entry = preprocess_case(raw / "case_00000", out, min_shape=8)
    image = np.load(out / "case_00000_x.npy", allow_pickle=False)
    label = np.load(out / "case_00000_y.npy", allow_pickle=False)
    assert image.dtype == np.float32 and label.dtype == np.uint8
    assert image.shape == label.shape == (1, 8, 8, 8)  # (7, 6, 7) edge-padded to 8 per axis
    assert entry["resampled"] is True and entry["shape"] == [1, 8, 8, 8]
    assert entry["spacing"] == pytest.approx(list(SPACING))
    assert image.min() >= NORM_LOW - 1e-6 and image.max() <= NORM_HIGH + 1e-6
    assert set(np.unique(label)) <= {0, 1, 2}
    # Edge padding: (8-7)//2 = 0 before, 1 after on depth; (8-6)//2 = 1 before and after on height.
    np.testing.assert_array_equal(image[:, 7], image[:, 6])
    np.testing.assert_array_equal(image[:, :, 0], image[:, :, 1])
    np.testing.assert_array_equal(image[:, :, 7], image[:, :, 6])
    np.testing.assert_array_equal(label[:, :, :, 7], label[:, :, :, 6])


def test_corners_survive_align_corners_resampling(raw: Path, tmp_path: Path) -> None:
    """With align_corners=True the 8 corner voxels keep their value (then clip + normalise)."""
    out = tmp_path / "out"
    out.mkdir()
    preprocess_case(raw / "case_00000", out, min_shape=1)
    image = np.load(out / "case_00000_x.npy")[0]
    source = known_case().image.astype(np.float32)
    for corner in [(0, 0, 0), (-1, -1, -1), (0, -1, 0), (-1, 0, -1)]:
        expected = (np.clip(source[corner], -79.0, 304.0) - 101.0) / 76.9
        assert image[corner] == pytest.approx(expected, abs=1e-6)


def test_large_volume_is_not_cropped(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    write_case(raw, known_case(spacing=(1.6, 1.2, 1.2), shape=(6, 10, 12)))
    out = tmp_path / "out"
    out.mkdir()
    entry = preprocess_case(raw / "case_00000", out, min_shape=4)
    # float32(1.6) != 1.6, so the reference resamples even here, to the same shape.
    assert entry["shape"] == [1, 6, 10, 12]


def test_dataset_run_resumes_and_skips_unchanged(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    for index in range(3):
        write_case(raw, known_case(name=f"case_{index:05d}"))
    write_case(raw, known_case(name="case_00210"))  # ids >= 210 are ignored
    out = tmp_path / "out"
    config = PreprocessConfig(raw_dir=raw, out_dir=out, min_shape=8, workers=1)

    def stop_after_first(result, total) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        preprocess_dataset(config, stop_after_first)
    assert list(read_manifest(out)["cases"]) == ["case_00000"]
    assert not list(out.glob(".*.tmp"))

    resumed = preprocess_dataset(config)
    assert [r.case for r in resumed.results] == ["case_00000", "case_00001", "case_00002"]
    assert [r.skipped for r in resumed.results] == [True, False, False]

    again = preprocess_dataset(config)
    assert again.processed == 0

    (out / "case_00001_y.npy").unlink()
    write_case(raw, known_case(name="case_00002", shape=(5, 9, 12)))  # changed source
    changed = preprocess_dataset(config)
    assert [r.case for r in changed.results if not r.skipped] == ["case_00001", "case_00002"]
    manifest = read_manifest(out)
    for case, entry in manifest["cases"].items():
        for name, output in entry["outputs"].items():
            assert output["md5"] == md5(out / name), (case, name)

    other = preprocess_dataset(PreprocessConfig(raw_dir=raw, out_dir=out, min_shape=16, workers=1))
    assert other.processed == 3  # a different min_shape invalidates every case


def test_two_workers_write_the_same_bytes(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    for index in range(2):
        write_case(raw, known_case(name=f"case_{index:05d}", shape=(5 + index, 9, 11)))
    one, two = tmp_path / "one", tmp_path / "two"
    preprocess_dataset(PreprocessConfig(raw_dir=raw, out_dir=one, min_shape=8, workers=1))
    preprocess_dataset(PreprocessConfig(raw_dir=raw, out_dir=two, min_shape=8, workers=2))
    names = sorted(p.name for p in one.glob("case_*.npy"))
    assert names == sorted(p.name for p in two.glob("case_*.npy")) and len(names) == 4
    for name in names:
        assert md5(one / name) == md5(two / name)
    assert read_manifest(one)["cases"]["case_00001"]["outputs"] == read_manifest(two)["cases"]["case_00001"][
        "outputs"
    ]


def _nan_case(raw: Path) -> None:
    case = known_case()
    folder = raw / case.name
    folder.mkdir(parents=True)
    image = case.image.astype(np.float32)
    image[2, 3, 4] = np.nan
    nibabel.save(nibabel.Nifti1Image(image, np.diag([*SPACING, 1.0])), folder / "imaging.nii.gz")
    nibabel.save(nibabel.Nifti1Image(case.label, np.diag([*SPACING, 1.0])), folder / "segmentation.nii.gz")


def test_bad_cases_raise_one_line_naming_the_case(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    _nan_case(raw)
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(DataError, match=r"case_00000/imaging.nii.gz: image holds NaN"):
        preprocess_case(raw / "case_00000", out, min_shape=8)

    truncated = tmp_path / "trunc"
    write_case(truncated, known_case())
    path = truncated / "case_00000" / "segmentation.nii.gz"
    path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])
    with pytest.raises(DataError, match=r"case_00000/segmentation.nii.gz: unreadable NIfTI"):
        preprocess_case(truncated / "case_00000", out, min_shape=8)
    assert not list(out.iterdir())  # nothing half-written


def test_written_npy_is_plain_and_loads_without_pickle(raw: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    preprocess_case(raw / "case_00000", out, min_shape=8)
    header = (out / "case_00000_x.npy").read_bytes()[:128].decode("latin1")
    assert header.startswith("\x93NUMPY") and "'descr': '<f4'" in header
    assert "'shape': (1, 8, 8, 8)" in header


@pytest.mark.parametrize("mode", ["trilinear", "nearest"])
def test_resampling_bytes_do_not_depend_on_input_memory_layout(mode: str) -> None:
    """``resample`` feeds C-contiguous arrays where the reference fed nibabel's Fortran order."""
    import torch
    from torch.nn.functional import interpolate

    rng = np.random.default_rng(0)
    dtype = np.float32 if mode == "trilinear" else np.uint8
    volume = np.asfortranarray(rng.normal(100, 150, (13, 37, 41)).astype(dtype))[None, None]
    extra = {"align_corners": True} if mode == "trilinear" else {}
    size = [23, 29, 30]
    as_given = interpolate(torch.from_numpy(volume), size=size, mode=mode, **extra).numpy()
    contiguous = interpolate(torch.from_numpy(np.ascontiguousarray(volume)), size=size, mode=mode, **extra).numpy()
    assert as_given.tobytes() == contiguous.tobytes()


def test_c_order_copies_values_exactly() -> None:
    from workloads.unet3d.preprocess import c_order

    volume = np.asfortranarray(np.random.default_rng(1).normal(size=(1, 7, 130, 70)).astype(np.float32))
    copied = c_order(volume, tile=64)
    assert copied.flags.c_contiguous
    np.testing.assert_array_equal(copied, volume)
    already = np.zeros((1, 2, 3, 4), np.uint8)
    assert c_order(already) is already
