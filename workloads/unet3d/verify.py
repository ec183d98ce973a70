"""Checks of a preprocessed unet3d dataset: the fast readiness check and the checksum verification.

``check_ready`` reads only npy headers and file sizes (seconds even for the real 420 files).
``verify_checksums`` hashes every file and compares with the reference ``checksum.json`` or
with the manifest written at preprocessing time; a mismatch names the files and the stage of
the procedure that could make them differ.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from workloads.common.errors import DataError
from workloads.unet3d.split import (
    MAX_CASE_ID,
    case_index,
    image_file,
    label_file,
    load_split,
    preprocessed_cases,
)

REFERENCE_CHECKSUMS = Path(__file__).with_name("checksum.json")
MANIFEST = "manifest.json"
_SHOWN = 5  # mismatching cases named in one message


@dataclass(frozen=True, kw_only=True)
class NpyHeader:
    """What an .npy header says, plus the file size it implies."""

    shape: tuple[int, ...]
    """Array shape."""
    dtype: np.dtype
    """Element type."""
    expected_size: int
    """Bytes the file must have: header plus data."""


def read_npy_header(path: Path) -> NpyHeader:
    """Parse the header of an .npy file without reading its data."""
    try:
        with path.open("rb") as handle:
            version = np.lib.format.read_magic(handle)
            if version == (1, 0):
                shape, _, dtype = np.lib.format.read_array_header_1_0(handle)
            else:
                shape, _, dtype = np.lib.format.read_array_header_2_0(handle)
            offset = handle.tell()
    except (OSError, ValueError) as err:
        raise DataError(f"{path.name}: not a readable .npy file ({err})") from None
    return NpyHeader(shape=shape, dtype=dtype, expected_size=offset + int(np.prod(shape)) * dtype.itemsize)


@dataclass(frozen=True, kw_only=True)
class ReadySummary:
    """What ``check_ready`` found."""

    train: int
    """Training cases."""
    evaluation: int
    """Evaluation cases."""
    smallest: tuple[int, ...]
    """Smallest (D, H, W) over all cases."""


def _check_pair(data_dir: Path, case: str, min_shape: int) -> tuple[int, ...]:
    """Shape of one case's image; DataError naming the file when the pair is not usable."""
    shapes = {}
    for name, dtype in ((image_file(case), np.float32), (label_file(case), np.uint8)):
        path = data_dir / name
        if not path.is_file():
            raise DataError(f"{data_dir}: {name} is missing ({case} is incomplete)")
        header = read_npy_header(path)
        if header.dtype != np.dtype(dtype):
            raise DataError(f"{data_dir}: {name} has dtype {header.dtype}, expected {np.dtype(dtype)}")
        if len(header.shape) != 4 or header.shape[0] != 1:
            raise DataError(f"{data_dir}: {name} has shape {header.shape}, expected (1, D, H, W)")
        if min(header.shape[1:]) < min_shape:
            raise DataError(f"{data_dir}: {name} has shape {header.shape}, smaller than {min_shape} per axis")
        size = path.stat().st_size
        if size != header.expected_size:
            raise DataError(
                f"{data_dir}: {name} is truncated or padded ({size} bytes, header implies {header.expected_size})"
            )
        shapes[name] = header.shape
    if shapes[image_file(case)] != shapes[label_file(case)]:
        raise DataError(
            f"{data_dir}: {case} image shape {shapes[image_file(case)]} "
            f"differs from label shape {shapes[label_file(case)]}"
        )
    _check_middle_slice(data_dir, case)
    return shapes[image_file(case)][1:]


LABEL_CLASSES = (0, 1, 2)
"""KiTS19's label values: background, kidney, tumour."""


def _check_middle_slice(data_dir: Path, case: str) -> None:
    """The values of one axial slice (the middle one, a contiguous read of H x W voxels): finite
    image intensities and labels among KiTS19's classes. A volume of NaN (a broken preprocessing
    run) is caught here, before a run trains on it; `verify` checks every byte against checksums."""
    image = np.load(data_dir / image_file(case), mmap_mode="r")
    middle = np.asarray(image[0, image.shape[1] // 2])
    if not np.isfinite(middle).all():
        bad = int(np.count_nonzero(~np.isfinite(middle)))
        raise DataError(f"{data_dir}: {image_file(case)} holds {bad} NaN or infinite values in its middle slice:"
                        " preprocess the case again")
    labels = np.load(data_dir / label_file(case), mmap_mode="r")
    found = np.unique(np.asarray(labels[0, labels.shape[1] // 2]))
    unknown = sorted(set(found.tolist()) - set(LABEL_CLASSES))
    if unknown:
        raise DataError(f"{data_dir}: {label_file(case)} holds label {unknown[0]} (KiTS19 has 0, 1 and 2):"
                        " preprocess the case again")


def _manifest_min_shape(data_dir: Path) -> int:
    try:
        manifest = json.loads((data_dir / MANIFEST).read_text())
        entries = manifest["cases"].values()
        return min(int(entry["params"]["min_shape"]) for entry in entries)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return 1


def check_ready(data_dir: Path) -> ReadySummary:
    """Fast check that ``data_dir`` is training ready; DataError naming the first problem."""
    if not data_dir.is_dir():
        raise DataError(f"{data_dir}: dataset folder does not exist")
    labels = {
        path.name[: -len("_y.npy")]
        for path in data_dir.glob("case_*_y.npy")
        if (index := case_index(path.name[: -len("_y.npy")])) is not None and index < MAX_CASE_ID
    }
    images = set(preprocessed_cases(data_dir))
    orphans = sorted(labels - images)
    if orphans:
        raise DataError(f"{data_dir}: {image_file(orphans[0])} is missing ({orphans[0]} is incomplete)")
    train, evaluation = load_split(data_dir)
    if not train or not evaluation:
        raise DataError(
            f"{data_dir}: the split needs training and evaluation cases (train {len(train)}, "
            f"eval {len(evaluation)}); add split.json or the reference cases"
        )
    unknown = sorted(set(train + evaluation) - images)
    if unknown:
        raise DataError(f"{data_dir}: split names {unknown[0]} but {image_file(unknown[0])} is missing")
    min_shape = _manifest_min_shape(data_dir)
    shapes = [_check_pair(data_dir, case, min_shape) for case in sorted(images)]
    return ReadySummary(
        train=len(train), evaluation=len(evaluation), smallest=tuple(np.min(shapes, axis=0).tolist())
    )


# ---- checksums ------------------------------------------------------------------------------


def load_checksums(path: Path) -> dict[str, str]:
    """``{file name: md5}`` from a reference-style checksum file or a preprocessing manifest."""
    try:
        raw = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise DataError(f"{path}: unreadable checksum file ({err})") from None
    if isinstance(raw, dict) and isinstance(raw.get("cases"), dict):  # a preprocessing manifest
        try:
            return {
                name: output["md5"]
                for entry in raw["cases"].values()
                for name, output in entry["outputs"].items()
            }
        except (KeyError, TypeError, AttributeError):
            raise DataError(f"{path}: manifest without output checksums") from None
    if isinstance(raw, dict) and all(isinstance(v, str) for v in raw.values()):
        return raw
    raise DataError(f"{path}: expected {{file name: md5}} or a preprocessing manifest")


def file_md5(path: Path) -> str:
    digest = hashlib.md5()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


def _stage(case: str, bad: set[str], reference: bool) -> str:
    """Which step of the procedure could make this case's files differ."""
    image_bad, label_bad = image_file(case) in bad, label_file(case) in bad
    if not reference:
        return "changed since preprocessing (modified or corrupted; re-run preprocess)"
    if image_bad and not label_bad:
        return (
            "image only: the label matches, so shapes and padding agree; trilinear interpolation "
            "arithmetic (this torch vs the reference's torch 1.7-era build) or clip/normalise rounding"
        )
    if label_bad and not image_bad:
        return "label only: nearest-neighbour resampling index rounding"
    return "image and label: the resampled shape or padding differs, or the raw case does (run verify-raw)"


def _first(names: list[str]) -> str:
    return ", ".join(names[:_SHOWN]) + (", ..." if len(names) > _SHOWN else "")


def verify_checksums(data_dir: Path, checksums: Path, reference: bool) -> int:
    """Compare every ``case_*.npy`` in ``data_dir`` with ``checksums``; return the number of files.

    ``reference`` says the sums come from the MLPerf reference (so a mismatch is diagnosed by
    stage) rather than from our own manifest (so a mismatch means the file changed since).
    """
    expected = load_checksums(checksums)
    if not data_dir.is_dir():
        raise DataError(f"{data_dir}: dataset folder does not exist")
    present = {path.name for path in data_dir.glob("case_*.npy")}
    missing = sorted(set(expected) - present)
    extra = sorted(present - set(expected))
    bad = {name for name in sorted(present & set(expected)) if file_md5(data_dir / name) != expected[name]}
    problems = []
    if missing:
        problems.append(f"{len(missing)} files missing ({_first(missing)})")
    if extra:
        problems.append(f"{len(extra)} files not in {checksums.name} ({_first(extra)})")
    if bad:
        cases = sorted({name[: -len("_x.npy")] for name in bad})
        described = "; ".join(f"{case}: {_stage(case, bad, reference)}" for case in cases[:_SHOWN])
        more = f"; and {len(cases) - _SHOWN} more cases" if len(cases) > _SHOWN else ""
        problems.append(f"{len(bad)} of {len(expected)} files differ from {checksums.name} ({described}{more})")
    if problems:
        raise DataError(f"{data_dir}: " + "; ".join(problems))
    return len(expected)
