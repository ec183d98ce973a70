"""Verification of a raw KiTS19 layout before preprocessing.

    RAW/case_XXXXX/imaging.nii.gz       CT volume
    RAW/case_XXXXX/segmentation.nii.gz  labels, same shape
    RAW/kits.json                       optional; when present, lists the cases that must exist

Every problem is named with its case and file: missing case, missing file, unreadable or
truncated .nii.gz, image/label shape mismatch, NaN in an image, empty folder.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable
from pathlib import Path

import nibabel
import numpy as np

from workloads.common.errors import DataError
from workloads.unet3d.parallel import map_unordered
from workloads.unet3d.split import MAX_CASE_ID, case_index, case_name

IMAGE_NAME = "imaging.nii.gz"
LABEL_NAME = "segmentation.nii.gz"
KITS_JSON = "kits.json"
_READ_ERRORS = (OSError, EOFError, ValueError, zlib.error, nibabel.filebasedimages.ImageFileError)


def list_raw_cases(raw_dir: Path) -> list[str]:
    """Case folders of ``raw_dir`` with id < 210, sorted; DataError when there are none."""
    if not raw_dir.is_dir():
        raise DataError(f"{raw_dir}: raw data folder does not exist (see `how-to-get`)")
    cases = sorted(
        path.name
        for path in raw_dir.iterdir()
        if path.is_dir() and (index := case_index(path.name)) is not None and index < MAX_CASE_ID
    )
    if not cases:
        raise DataError(f"{raw_dir}: no case_XXXXX folders (empty or not a KiTS19 data folder)")
    return cases


def expected_cases(raw_dir: Path, present: list[str]) -> tuple[list[str], str]:
    """Cases that should exist (from kits.json, else 0..highest present) and where that comes from."""
    kits = raw_dir / KITS_JSON
    if kits.is_file():
        try:
            entries = json.loads(kits.read_text())
            listed = [entry["case_id"] for entry in entries]
        except (OSError, ValueError, TypeError, KeyError) as err:
            raise DataError(f"{kits}: unreadable ({type(err).__name__}: {err})") from None
        wanted = sorted(
            case for case in listed if (index := case_index(str(case))) is not None and index < MAX_CASE_ID
        )
        return wanted, "listed in kits.json"
    highest = max(case_index(case) or 0 for case in present)
    return [case_name(i) for i in range(highest + 1)], f"ids run from 0 to {highest}; no {KITS_JSON} lists the cases"


def check_raw_case(case_dir: Path, read_data: bool) -> str | None:
    """The first problem of one case folder, or None. ``read_data`` decompresses the volumes."""
    case = case_dir.name
    for name in (IMAGE_NAME, LABEL_NAME):
        if not (case_dir / name).is_file():
            return f"{case}/{name}: missing file"
    images = {}
    for name in (IMAGE_NAME, LABEL_NAME):
        try:
            images[name] = nibabel.load(case_dir / name)
        except _READ_ERRORS as err:
            return f"{case}/{name}: unreadable NIfTI ({type(err).__name__}: {err})"
    image_shape, label_shape = images[IMAGE_NAME].shape, images[LABEL_NAME].shape
    if len(image_shape) != 3:
        return f"{case}/{IMAGE_NAME}: expected a 3-D volume, got shape {image_shape}"
    if image_shape != label_shape:
        return f"{case}: image shape {image_shape} differs from segmentation shape {label_shape}"
    if not read_data:
        return None
    for name, image in images.items():
        try:
            data = np.asanyarray(image.dataobj)
        except _READ_ERRORS as err:
            return f"{case}/{name}: truncated or corrupt ({type(err).__name__}: {err})"
        if name == IMAGE_NAME and data.dtype.kind == "f" and np.isnan(data).any():
            return f"{case}/{IMAGE_NAME}: image holds NaN values"
        if name == LABEL_NAME and (data.min() < 0 or data.max() > 2):
            return f"{case}/{LABEL_NAME}: labels outside 0..2 (min {data.min()}, max {data.max()})"
    return None


def _check_job(case_dir: Path, read_data: bool) -> tuple[str, str | None]:
    return case_dir.name, check_raw_case(case_dir, read_data)


def verify_raw(
    raw_dir: Path, workers: int = 1, read_data: bool = True, on_case: Callable[[str], None] | None = None
) -> list[str]:
    """Check the whole layout; return the case ids, or raise DataError naming the first problem.

    ``on_case(case)`` is called as each case folder has been checked (for a progress bar).
    """
    present = list_raw_cases(raw_dir)
    wanted, source = expected_cases(raw_dir, present)
    problems = [f"{case}: missing case folder ({source})" for case in sorted(set(wanted) - set(present))]
    jobs = [(raw_dir / case, read_data) for case in present]
    found = []
    for case, problem in map_unordered(_check_job, jobs, workers):
        if problem is not None:
            found.append((case, problem))
        if on_case:
            on_case(case)
    problems.extend(problem for _, problem in sorted(found))
    if problems:
        more = f" (and {len(problems) - 1} more problems)" if len(problems) > 1 else ""
        raise DataError(f"{raw_dir}: {problems[0]}{more}")
    return present
