"""Synthetic cases (``synthetic.py``) written in the raw layout the real KiTS19 data has.

    RAW/case_XXXXX/imaging.nii.gz        CT in Hounsfield units (int16), axes (slices, rows, cols)
    RAW/case_XXXXX/segmentation.nii.gz   0 background, 1 kidney, 2 tumour (uint8)
    RAW/kits.json                        one entry per case (what was generated)

Cases are written in parallel (case ``k`` of seed ``s`` depends only on (s, k)), each file
atomically; ``kits.json`` last.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import nibabel
import numpy as np

from workloads.common.atomic import write_json
from workloads.common.errors import DataError
from workloads.unet3d.parallel import map_unordered
from workloads.unet3d.raw_check import IMAGE_NAME, KITS_JSON, LABEL_NAME
from workloads.unet3d.split import MAX_CASE_ID
from workloads.unet3d.synthetic import SizeSpec, SyntheticCase, generate_case


def _affine(spacing: tuple[float, float, float]) -> np.ndarray:
    """A KiTS19-style affine: axes (slices, rows, cols), header pixdim[1:4] = spacing."""
    slice_mm, row_mm, col_mm = spacing
    return np.array(
        [[0.0, 0.0, -col_mm, 0.0], [0.0, -row_mm, 0.0, 0.0], [-slice_mm, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0]]
    )


def write_case(raw_dir: Path, case: SyntheticCase) -> dict[str, object]:
    """Write ``case`` under ``raw_dir`` (each file atomically); return its kits.json entry."""
    folder = raw_dir / case.name
    folder.mkdir(parents=True, exist_ok=True)
    affine = _affine(case.spacing)
    for name, data in ((IMAGE_NAME, case.image), (LABEL_NAME, case.label)):
        image = nibabel.Nifti1Image(data, affine)
        image.header.set_zooms(case.spacing)
        tmp = folder / f".{name}.partial.nii.gz"
        nibabel.save(image, tmp)
        tmp.replace(folder / name)
    return {
        "case_id": case.name,
        "synthetic": True,
        "shape": list(case.image.shape),
        "spacing_mm": list(case.spacing),
        "tumour_sides": list(case.tumour_sides),
        "kidney_voxels": int((case.label == 1).sum()),
        "tumour_voxels": int((case.label == 2).sum()),
    }


def make_case(
    raw_dir: Path, index: int, seed: int, size: SizeSpec, tumour_contrast: float = 1.0
) -> dict[str, object]:
    """Generate and write one case (the unit of parallel work)."""
    entry = write_case(raw_dir, generate_case(index, seed, size, tumour_contrast))
    if tumour_contrast != 1.0:
        entry["tumour_contrast"] = tumour_contrast
    return entry


def check_case_count(cases: int) -> None:
    if not 1 <= cases <= MAX_CASE_ID:
        raise DataError(f"--cases {cases}: must be between 1 and {MAX_CASE_ID} (KiTS19 ids 0..209)")


def check_tumour_contrast(contrast: float) -> None:
    if not 0.0 < contrast <= 3.0:
        raise DataError(f"--tumour-contrast {contrast}: must be in (0, 3]")


def write_kits_json(raw_dir: Path, entries: list[dict[str, object]], seed: int) -> None:
    ordered = sorted(entries, key=lambda entry: str(entry["case_id"]))
    for entry in ordered:
        entry["generator_seed"] = seed
    write_json(raw_dir / KITS_JSON, ordered)


def generate_raw(
    raw_dir: Path,
    cases: int,
    seed: int,
    size: SizeSpec,
    workers: int = 1,
    on_case: Callable[[dict[str, object]], None] | None = None,
    tumour_contrast: float = 1.0,
) -> list[dict[str, object]]:
    """Write cases 0..cases-1 of ``seed`` and ``kits.json`` into ``raw_dir``; return the entries."""
    check_case_count(cases)
    check_tumour_contrast(tumour_contrast)
    raw_dir.mkdir(parents=True, exist_ok=True)
    entries = []
    jobs = [(raw_dir, index, seed, size, tumour_contrast) for index in range(cases)]
    for entry in map_unordered(make_case, jobs, workers):
        entries.append(entry)
        if on_case:
            on_case(entry)
    write_kits_json(raw_dir, entries, seed)
    return sorted(entries, key=lambda entry: str(entry["case_id"]))
