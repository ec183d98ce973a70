"""The one rule a raw KiTS19 case meets before anything reads its voxels, and the one its voxels meet.

Training's raw check (`raw_check`), its preprocessing (`preprocess.load_pair`) and the inference
harness's preprocessing (through ``load_pair``) all call these, so that a case one of them takes the
others take too, and a case one refuses is refused by each in the same words:

- the files: ``imaging.nii.gz`` and ``segmentation.nii.gz`` are regular files (a symlink loop, a
  FIFO, a device are named as such, never read: reading them blocks or never ends);
- the headers, before any voxel is decompressed: 3-D volumes of the same shape, real numbers (not
  complex), at most `MAX_VOXELS` voxels as stored and once resampled to the target spacing (a gzip
  bomb's header or a spacing of 1000 mm asks numpy for terabytes), the image's spacing
  (``pixdim[1:4]``) finite and positive;
- the voxels: the image finite (no NaN or infinity: normalisation and the loss would carry them
  into every weight), the labels 0, 1 or 2 (background, kidney, tumour) and nothing else.
"""

from __future__ import annotations

import logging
import math
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import nibabel
import numpy as np

from workloads.common.errors import DataError
from workloads.common.files import file_problem

IMAGE_NAME = "imaging.nii.gz"
LABEL_NAME = "segmentation.nii.gz"
TARGET_SPACING = [1.6, 1.2, 1.2]  # mm (slices, rows, cols); a list: the reference compares lists
LABELS = (0, 1, 2)
MAX_VOXELS = 2**29
"""The most voxels a volume may hold, as stored and once resampled: about twice KiTS19's largest case
(1059 x 512 x 512, 2.8e8 voxels). Read as float64 that is 4 GiB."""
READ_ERRORS = (OSError, EOFError, ValueError, zlib.error, nibabel.filebasedimages.ImageFileError)


def resampled_shape(spacing: list[float], shape: tuple[int, ...]) -> list[int]:
    """``int(spacing / target * shape)`` per spatial axis."""
    return (np.array(spacing) / np.array(TARGET_SPACING) * np.array(shape)).astype(int).tolist()


def check_files(case_dir: Path) -> None:
    """DataError naming the first of the case's two files that is not a regular file."""
    for name in (IMAGE_NAME, LABEL_NAME):
        problem = file_problem(case_dir / name)
        if problem:
            raise DataError(f"{case_dir.name}/{name}: {problem}")


def stored_spacing(path: Path, volume: nibabel.Nifti1Image) -> list[float]:
    """``pixdim[1:4]`` as the file stores it: nibabel's loaded header has made a 0 into 1 and a negative
    spacing positive (a logged "fix"), which would hide a broken header."""
    with nibabel.openers.ImageOpener(path) as stream:
        header = type(volume.header).from_fileobj(stream, check=False)
    return [float(value) for value in header["pixdim"][1:4]]


def _header_problem(path: Path, volume: nibabel.Nifti1Image, spacing_used: bool) -> str | None:
    dtype = volume.get_data_dtype()
    if dtype.kind == "c":
        return f"complex voxels ({dtype}); a CT volume and its labels are real numbers"
    if dtype.kind not in "biuf":
        return f"voxels of type {dtype}, not numbers"
    shape = tuple(int(size) for size in volume.shape)
    if len(shape) != 3:
        return f"expected a 3-D volume, got shape {shape}"
    if min(shape) < 1:
        return f"an empty volume, shape {shape}"
    voxels = math.prod(shape)
    if voxels > MAX_VOXELS:
        return f"shape {shape} is {voxels:,} voxels, over the {MAX_VOXELS:,} a KiTS19 volume can hold"
    if not spacing_used:
        return None
    spacing = stored_spacing(path, volume)
    if not all(math.isfinite(value) and value > 0 for value in spacing):
        return f"spacing (pixdim[1:4]) {spacing}: each must be a finite, positive number of mm"
    if spacing == TARGET_SPACING:
        return None
    sizes = [value / target * size for value, target, size in zip(spacing, TARGET_SPACING, shape, strict=True)]
    if min(sizes) < 1 or math.prod(sizes) > MAX_VOXELS:
        return (f"spacing {spacing} mm resamples shape {shape} to {[int(s) for s in sizes]} at "
                f"{TARGET_SPACING} mm: {'an empty volume' if min(sizes) < 1 else f'over {MAX_VOXELS:,} voxels'}")
    return None


@contextmanager
def header_fixes_unsaid() -> Iterator[None]:
    """nibabel's log of what it "fixes" in a header it loads (a zero or negative spacing made 1 or
    positive) kept off stderr: the checks here name the problem, in one line. (nibabel's own
    LoggingOutputSuppressor leaves the logger without a handler, so Python's last resort prints it.)"""
    logger = nibabel.imageglobals.logger
    level = logger.level
    logger.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        logger.setLevel(level)


def open_pair(case_dir: Path) -> tuple[nibabel.Nifti1Image, nibabel.Nifti1Image]:
    """The case's image and label, their files and headers checked (no voxel read yet); DataError
    naming the case and the file."""
    check_files(case_dir)
    volumes = []
    for name in (IMAGE_NAME, LABEL_NAME):
        try:
            with header_fixes_unsaid():
                volume = nibabel.load(case_dir / name)
        except READ_ERRORS as err:
            raise DataError(f"{case_dir.name}/{name}: unreadable NIfTI ({type(err).__name__}: {err})") from None
        try:
            problem = _header_problem(case_dir / name, volume, spacing_used=name == IMAGE_NAME)
        except READ_ERRORS as err:
            raise DataError(f"{case_dir.name}/{name}: unreadable NIfTI ({type(err).__name__}: {err})") from None
        if problem:
            raise DataError(f"{case_dir.name}/{name}: {problem}")
        volumes.append(volume)
    image, label = volumes
    if image.shape != label.shape:
        raise DataError(f"{case_dir.name}: image shape {image.shape} differs from segmentation shape {label.shape}")
    return image, label


def check_voxels(case: str, image: np.ndarray, label: np.ndarray) -> None:
    """DataError when the image holds NaN or infinity or the labels hold anything but 0, 1, 2."""
    if image.dtype.kind == "f":
        with np.errstate(over="ignore"):  # what float32, the precision preprocessing computes in, holds
            bad = int(np.count_nonzero(~np.isfinite(image.astype(np.float32, copy=False))))
        if bad:
            raise DataError(f"{case}/{IMAGE_NAME}: image holds NaN or infinite values ({bad:,} voxels, as float32); "
                            "a CT volume holds finite Hounsfield units")
    if label.dtype.kind in "biu":
        outside = label.size and (label.min() < min(LABELS) or label.max() > max(LABELS))
    else:
        outside = not np.isin(label, LABELS).all()
    if outside:
        found = np.unique(label[~np.isin(label, LABELS)])[:4]
        raise DataError(f"{case}/{LABEL_NAME}: labels outside 0, 1, 2 (found {', '.join(f'{v:g}' for v in found)}); "
                        "KiTS19's labels are background, kidney and tumour")
