"""Verification of a raw KiTS19 layout before preprocessing.

    RAW/case_XXXXX/imaging.nii.gz       CT volume
    RAW/case_XXXXX/segmentation.nii.gz  labels, same shape
    RAW/kits.json                       optional; when present, lists the cases that must exist

Every problem is named with its case and file: missing case, empty folder, and each case's
files, headers and voxels by the one rule of `raw_case` (missing or special files, unreadable or
truncated .nii.gz, shapes, sizes, spacing, NaN or infinite voxels, labels outside 0..2).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np

from workloads.common.errors import DataError
from workloads.common.files import file_problem
from workloads.unet3d.parallel import map_unordered
from workloads.unet3d.raw_case import IMAGE_NAME, LABEL_NAME, READ_ERRORS, check_voxels, open_pair
from workloads.unet3d.split import MAX_CASE_ID, case_index, case_name

KITS_JSON = "kits.json"
KITS_JSON_MAX_BYTES = 64 * 2**20
"""KiTS19's kits.json is about 0.5 MB; a file far larger is not one."""


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


def read_kits_json(raw_dir: Path) -> object:
    """``RAW/kits.json``'s value, None when there is none; DataError when it is there and no JSON list
    of KiTS19's size (a FIFO, a device, a symlink loop, larger than `KITS_JSON_MAX_BYTES`, nested
    deeper than the decoder recurses)."""
    kits = raw_dir / KITS_JSON
    problem = file_problem(kits)
    if problem == "missing file":
        return None
    try:
        if problem:
            raise ValueError(problem)
        if kits.stat().st_size > KITS_JSON_MAX_BYTES:
            raise ValueError(f"over {KITS_JSON_MAX_BYTES // 2**20} MiB, not KiTS19's case list")
        return json.loads(kits.read_bytes())
    except RecursionError:
        raise DataError(f"{kits}: unreadable (nested too deep to be KiTS19's case list)") from None
    except (OSError, ValueError) as err:
        raise DataError(f"{kits}: unreadable ({type(err).__name__}: {err})") from None


def expected_cases(raw_dir: Path, present: list[str]) -> tuple[list[str], str]:
    """Cases that should exist (from kits.json, else 0..highest present) and where that comes from."""
    kits = raw_dir / KITS_JSON
    entries = read_kits_json(raw_dir)
    if entries is not None:
        try:
            listed = [entry["case_id"] for entry in entries]
        except (TypeError, KeyError) as err:
            raise DataError(f"{kits}: unreadable ({type(err).__name__}: {err})") from None
        wanted = sorted(
            case for case in listed if (index := case_index(str(case))) is not None and index < MAX_CASE_ID
        )
        return wanted, "listed in kits.json"
    highest = max(case_index(case) or 0 for case in present)
    return [case_name(i) for i in range(highest + 1)], f"ids run from 0 to {highest}; no {KITS_JSON} lists the cases"


def check_raw_case(case_dir: Path, read_data: bool) -> str | None:
    """The first problem of one case folder, or None: its files and headers (`raw_case`), and with
    ``read_data`` its voxels, decompressed."""
    try:
        images = open_pair(case_dir)
    except DataError as err:
        return str(err)
    if not read_data:
        return None
    data = []
    for name, image in zip((IMAGE_NAME, LABEL_NAME), images, strict=True):
        try:
            data.append(np.asanyarray(image.dataobj))
        except READ_ERRORS as err:
            return f"{case_dir.name}/{name}: truncated or corrupt ({type(err).__name__}: {err})"
    try:
        check_voxels(case_dir.name, *data)
    except DataError as err:
        return str(err)
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
