"""One rule for a raw KiTS19 case, in every reader: verify-raw, preprocess, prepare and the inference
harness's preprocessing refuse the same hostile or broken case in one line (exit 2), before reading
what they cannot hold, and write nothing. The cases are small NIfTI files made here with nibabel."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import zlib
from pathlib import Path

import nibabel
import numpy as np
import pytest

from workloads.common.errors import DataError
from workloads.inference.kits19.prepare import check_sources, select_cases
from workloads.inference.kits19.preprocess import preprocess_case as inference_preprocess_case
from workloads.unet3d.dataset import main
from workloads.unet3d.prepare import is_reference_kits19
from workloads.unet3d.split import case_name

SHAPE = (8, 10, 12)


def volumes() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    image = rng.uniform(-100, 300, SHAPE).astype(np.float32)
    label = np.zeros(SHAPE, np.uint8)
    label[2:5, 3:6, 4:8] = 1
    label[3, 4, 5] = 2
    return image, label


def write(path: Path, data: np.ndarray, spacing: tuple[float, float, float] = (1.6, 1.2, 1.2)) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    nibabel.save(nibabel.Nifti1Image(data, np.diag([*spacing, 1.0])), path)


def patch_pixdim(path: Path, spacing: list[float]) -> None:
    """The header's pixdim[1:4] as given, whatever the affine says (NIfTI-1: pixdim at byte 76, float32)."""
    raw = bytearray(gzip.decompress(path.read_bytes()))
    raw[80:92] = np.array(spacing, "<f4").tobytes()
    path.write_bytes(gzip.compress(bytes(raw)))


def raw_case(tmp_path: Path, image: np.ndarray | None = None, label: np.ndarray | None = None) -> Path:
    raw = tmp_path / "raw"
    good_image, good_label = volumes()
    write(raw / "case_00000" / "imaging.nii.gz", good_image if image is None else image)
    write(raw / "case_00000" / "segmentation.nii.gz", good_label if label is None else label)
    return raw


def gzip_bomb(path: Path, shape: tuple[int, int, int]) -> None:
    """A NIfTI whose header asks for ``shape`` int16 and whose gzip members hold that many zero bytes:
    2 GiB in about 2 MiB (gzip members concatenate)."""
    header = nibabel.Nifti1Image(np.zeros((1, 1, 1), np.int16), np.diag([1.6, 1.2, 1.2, 1.0])).header
    header.set_data_shape(shape)
    header_bytes = header.binaryblock + b"\0" * (int(header["vox_offset"]) - len(header.binaryblock))
    chunk = 64 * 2**20
    member = zlib.compressobj(9, zlib.DEFLATED, 31)
    zeros = member.compress(bytes(chunk)) + member.flush()
    total = int(np.prod(shape)) * 2
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as out:
        out.write(gzip.compress(header_bytes))
        for _ in range(total // chunk):
            out.write(zeros)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().err


def assert_refused(capsys, raw: Path, words: str, *, tmp_path: Path, data: bool = True,
                   preprocess: bool = True) -> None:
    """verify-raw (headers, and the voxels when ``data``), preprocess (which reads no kits.json) and prepare:
    each one line, exit 2."""
    commands = [["verify-raw", str(raw), "--workers", "1", "--headers-only"]] if not data else []
    commands += [["verify-raw", str(raw), "--workers", "1"],
                 ["prepare", str(raw), "--cache", str(tmp_path / "cache"), "--workers", "1", "--min-shape", "8"]]
    if preprocess:
        commands.append(["preprocess", str(raw), str(tmp_path / "out"), "--workers", "1", "--min-shape", "8"])
    for argv in commands:
        code, err = run(capsys, *argv)
        lines = [line for line in err.splitlines() if line.strip()]
        assert code == 2 and len(lines) == 1 and words in lines[0], (argv[0], code, err)
    out = tmp_path / "out"
    assert not out.exists() or sorted(p.name for p in out.iterdir()) == ["manifest.json"]
    cache = tmp_path / "cache"
    assert not cache.exists() or not [p for p in cache.iterdir() if p.is_dir() and not p.name.startswith(".")]


def test_a_well_formed_case_passes_every_reader(tmp_path: Path, capsys) -> None:
    raw = raw_case(tmp_path)
    assert run(capsys, "verify-raw", str(raw), "--workers", "1")[0] == 0
    assert run(capsys, "preprocess", str(raw), str(tmp_path / "out"), "--workers", "1", "--min-shape", "8")[0] == 0
    assert inference_preprocess_case(raw / "case_00000", (8, 8, 8)).label.max() == 2


def test_a_gzip_bomb_is_refused_by_its_header_before_a_voxel_is_decompressed(tmp_path: Path, capsys) -> None:
    raw = raw_case(tmp_path)
    bomb = raw / "case_00000" / "imaging.nii.gz"
    gzip_bomb(bomb, (1024, 1024, 1024))
    assert bomb.stat().st_size < 3 * 2**20
    assert_refused(capsys, raw, "case_00000/imaging.nii.gz: shape (1024, 1024, 1024) is 1,073,741,824 voxels, "
                   "over the 536,870,912 a KiTS19 volume can hold", tmp_path=tmp_path, data=False)


@pytest.mark.parametrize(("spacing", "words"), [
    ([1000.0, 1000.0, 1000.0],
     "spacing [1000.0, 1000.0, 1000.0] mm resamples shape (8, 10, 12) to [5000, 8333, 10000] at [1.6, 1.2, 1.2] "
     "mm: over 536,870,912 voxels"),
    ([float("nan"), 1.2, 1.2], "spacing (pixdim[1:4]) [nan, 1.2"),
    ([float("inf"), 1.2, 1.2], "spacing (pixdim[1:4]) [inf, 1.2"),
    ([0.0, 1.2, 1.2], "spacing (pixdim[1:4]) [0.0, 1.2"),
    ([-1.6, 1.2, 1.2], "spacing (pixdim[1:4]) [-1.6"),
    ([2e-2, 1.2, 1.2], "resamples shape (8, 10, 12) to [0, 10, 12] at [1.6, 1.2, 1.2] mm: an empty volume"),
])
def test_a_spacing_that_cannot_be_resampled_is_refused_from_the_header(tmp_path: Path, capsys, spacing,
                                                                       words) -> None:
    raw = raw_case(tmp_path)
    patch_pixdim(raw / "case_00000" / "imaging.nii.gz", spacing)
    assert_refused(capsys, raw, "case_00000/imaging.nii.gz: spacing ", tmp_path=tmp_path, data=False)
    assert_refused(capsys, raw, words, tmp_path=tmp_path, data=False)
    with pytest.raises(DataError, match="imaging.nii.gz: spacing "):
        inference_preprocess_case(raw / "case_00000", (8, 8, 8))


def test_a_zero_or_negative_spacing_is_one_line_on_the_terminal_not_nibabel_s_fix_beside_it(tmp_path: Path) -> None:
    # nibabel logs its "fix" of such a header (abs, or 1) through a handler of its own, which capsys
    # does not see: the user's stderr is the process's
    raw = raw_case(tmp_path)
    patch_pixdim(raw / "case_00000" / "imaging.nii.gz", [-1.6, 0.0, 1.2])
    done = subprocess.run([sys.executable, "-m", "workloads.unet3d.dataset", "verify-raw", str(raw), "--workers", "1",
                           "--headers-only"], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2 and done.stderr.splitlines() == [
        f"error: {raw}: case_00000/imaging.nii.gz: spacing (pixdim[1:4]) "
        "[-1.600000023841858, 0.0, 1.2000000476837158]: each must be a finite, positive number of mm"], done.stderr


def _with(value: float, dtype: str = "float32") -> np.ndarray:
    image = volumes()[0].astype(dtype)
    image[1, 2, 3] = value
    return image


def _labels(value: float, dtype: str) -> np.ndarray:
    label = volumes()[1].astype(dtype)
    label[0, 0, 0] = value
    return label


@pytest.mark.parametrize(("image", "label", "words"), [
    (_with(np.nan), None, "case_00000/imaging.nii.gz: image holds NaN or infinite values (1 voxels, as float32)"),
    (_with(np.inf), None, "case_00000/imaging.nii.gz: image holds NaN or infinite values"),
    (_with(-np.inf, "float64"), None, "case_00000/imaging.nii.gz: image holds NaN or infinite values"),
    (_with(1e39, "float64"), None, "image holds NaN or infinite values"),  # finite, but not as float32
    (None, _labels(255, "uint8"), "case_00000/segmentation.nii.gz: labels outside 0, 1, 2 (found 255)"),
    (None, _labels(-1, "int16"), "labels outside 0, 1, 2 (found -1)"),
    (None, _labels(1.5, "float32"), "labels outside 0, 1, 2 (found 1.5)"),
    (None, _labels(np.nan, "float32"), "labels outside 0, 1, 2 (found nan)"),
])
def test_voxels_no_ct_or_label_holds_are_refused_by_each_reader(tmp_path: Path, capsys, image, label,
                                                                 words) -> None:
    raw = raw_case(tmp_path, image, label)
    assert_refused(capsys, raw, words, tmp_path=tmp_path)
    with pytest.raises(DataError, match=words.split(": ", 1)[-1].split(" (")[0]):
        inference_preprocess_case(raw / "case_00000", (8, 8, 8))


def test_complex_voxels_are_refused_from_the_header(tmp_path: Path, capsys) -> None:
    raw = raw_case(tmp_path, image=volumes()[0].astype(np.complex64))
    assert_refused(capsys, raw, "case_00000/imaging.nii.gz: complex voxels (complex64)", tmp_path=tmp_path,
                   data=False)


@pytest.mark.parametrize("kind", ["symlink loop", "fifo", "device", "folder", "dangling link"])
def test_a_file_that_is_not_a_file_is_named_as_what_it_is_and_never_read(tmp_path: Path, capsys, kind) -> None:
    raw = raw_case(tmp_path)
    path = raw / "case_00000" / "imaging.nii.gz"
    path.unlink()
    if kind == "symlink loop":
        path.symlink_to(path)
    elif kind == "fifo":
        os.mkfifo(path)  # reading it would wait for a writer forever
    elif kind == "device":
        path.symlink_to("/dev/zero")  # reading it never ends
    elif kind == "folder":
        path.mkdir()
    else:
        path.symlink_to(tmp_path / "nowhere")
    words = {"symlink loop": "a symbolic link loop, not a file", "fifo": "a FIFO, not a file",
             "device": "a device, not a file", "folder": "a folder, not a file", "dangling link": "missing file"}
    assert_refused(capsys, raw, f"case_00000/imaging.nii.gz: {words[kind]}", tmp_path=tmp_path, data=False)
    # the inference harness takes the case, and its check names the file (before: a case whose files are
    # not regular files was left out without a word, the test run on the others)
    assert select_cases(raw) == [("case_00000", "case_00000")]
    with pytest.raises(DataError, match=f"case_00000/imaging.nii.gz: {words[kind]}"):
        check_sources(raw, ["case_00000"])


def test_a_kits_json_nested_deep_is_one_line(tmp_path: Path, capsys) -> None:
    raw = raw_case(tmp_path)
    (raw / "kits.json").write_text("[" * 100_000 + "]" * 100_000)
    assert_refused(capsys, raw, "kits.json: unreadable (nested too deep", tmp_path=tmp_path, data=False,
                   preprocess=False)
    with pytest.raises(DataError, match="kits.json: unreadable"):  # the check the inference harness calls too
        is_reference_kits19(raw, [case_name(i) for i in range(210)])
    (raw / "kits.json").unlink()
    os.mkfifo(raw / "kits.json")
    assert_refused(capsys, raw, "kits.json: unreadable (ValueError: a FIFO, not a file)", tmp_path=tmp_path,
                   data=False, preprocess=False)
    (raw / "kits.json").unlink()
    (raw / "kits.json").write_text(json.dumps([{"case_id": "case_00000"}]))
    assert run(capsys, "verify-raw", str(raw), "--workers", "1")[0] == 0
