"""KiTS19 as the MLPerf Inference reference preprocesses it for 3D-UNet (mlcommons/inference
``vision/medical_imaging/3d-unet-kits19``: ``preprocess.py``, ``global_vars.py``, ``meta/``).

Per case, the reference's steps in its order:
  1. image ``get_fdata()`` -> float32, label -> uint8, spacing from ``pixdim[1:4]`` (the training
     workload's `load_pair`);
  2. when the spacing (as a list) differs from [1.6, 1.2, 1.2] mm: ``scipy.ndimage.zoom`` by
     spacing / target, linear for the image, nearest for the label, mode constant with the
     volume's minimum, ``grid_mode=False``;
  3. clip to [-79, 304], then (x - 101) / 76.9 (the training workload's `normalize`);
  4. edge-pad every axis shorter than the ROI up to it (`pad_to_min_shape`);
  5. per axis, crop ``size % stride`` when it is less than half a stride, then pad up to a whole
     number of strides (at least one ROI), the image with -2.2 and the label with 0, the stride
     half the ROI (the training workload's `trim_slices` and `padding`, which its evaluation
     applies at evaluation time instead);
  6. ``pickle.dump([image, label])``, image (1, D, H, W) float32, label (1, D, H, W) uint8: the
     bytes ``meta/checksum_inference.json`` lists the md5 of.

Where it differs from the training reference's preprocessing (``workloads/unet3d/preprocess.py``):
resampling by ``scipy.ndimage.zoom`` (output shape ``round(shape * zoom)``) instead of torch's
trilinear ``interpolate`` (align_corners, shape ``int(...)``); padding to the ROI, and the
sliding-window crop and pad, done here once and kept in the file (the label padded with
background), so that the Dice counts the padded volume; the 43 cases of ``inference_cases.json``
(``case_00400`` is ``case_00185`` again: the reference's Makefile copies it) instead of the 42
evaluation cases.

The file is written as the reference's environment (Python 3.8, NumPy 1.x) pickles it, so that its
md5 is comparable with the reference's checksums whatever NumPy runs here: NumPy 2 names its array
constructor ``numpy._core.multiarray``, NumPy 1 ``numpy.core.multiarray`` (both load either). Files
are read back through an unpickler that accepts nothing but NumPy arrays.
"""

from __future__ import annotations

import hashlib
import io
import json
import pickle
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from workloads.common.errors import DataError
from workloads.unet3d.preprocess import TARGET_SPACING, load_pair, normalize, pad_to_min_shape
from workloads.unet3d.windows import PAD_VALUE, padding, trim_slices

HERE = Path(__file__).resolve().parent
INFERENCE_CASES_FILE = HERE / "inference_cases.json"
"""The reference's ``meta/inference_cases.json``: the 43 cases of the accuracy run."""
CHECKSUMS_FILE = HERE / "checksum_inference.json"
"""The reference's ``meta/checksum_inference.json``: md5 of each ``case_XXXXX.pkl``."""
DUPLICATES = {"case_00400": "case_00185"}
"""Inference cases the raw KiTS19 lacks, and the case the reference copies in their place."""
ROI_SHAPE = (128, 128, 128)
OVERLAP = 0.5
PICKLE_PROTOCOL = 4
"""The default protocol of the reference's Python 3.8 (``pickle.dump`` without one)."""
PROCEDURE_VERSION = 1
"""Bump when a change alters the bytes written: prepared folders are cached by it."""


def inference_cases() -> list[str]:
    return list(json.loads(INFERENCE_CASES_FILE.read_text()))


def reference_checksums() -> dict[str, str]:
    return dict(json.loads(CHECKSUMS_FILE.read_text()))


def strides(roi: Sequence[int], overlap: float = OVERLAP) -> tuple[int, ...]:
    return tuple(int(size * (1 - overlap)) for size in roi)


@dataclass(frozen=True, kw_only=True)
class Preprocessed:
    """One case as the reference preprocesses it."""

    image: np.ndarray
    """(1, D, H, W) float32."""
    label: np.ndarray
    """(1, D, H, W) uint8."""
    spacing: list[float]
    zoom: list[float]
    """The zoom factor per axis (spacing / target), whether or not it was applied."""


def resample(image: np.ndarray, label: np.ndarray, spacing: list[float]) -> tuple[np.ndarray, np.ndarray, list[float]]:
    """Step 2 on (D, H, W) volumes: the reference's ``zoom`` calls, skipped when the spacing is the target."""
    from scipy.ndimage import zoom

    factor = np.array(spacing) / np.array(TARGET_SPACING)
    if spacing != TARGET_SPACING:
        image = zoom(image, factor, order=1, mode="constant", cval=image.min(), grid_mode=False)
        label = zoom(label, factor, order=0, mode="constant", cval=label.min(), grid_mode=False)
    return image, label, factor.tolist()


def adjust_for_sliding_window(
    image: np.ndarray, label: np.ndarray, roi: Sequence[int]
) -> tuple[np.ndarray, np.ndarray]:
    """Step 5 on (1, D, H, W) arrays."""
    steps = strides(roi)
    trim = (slice(None), *trim_slices(tuple(image.shape[1:]), steps))
    image, label = image[trim], label[trim]
    pads = [(0, 0), *padding(tuple(image.shape[1:]), tuple(roi), steps)]
    image = np.pad(image, pads, mode="constant", constant_values=[PAD_VALUE])
    label = np.pad(label, pads, mode="constant", constant_values=[0])
    return image, label


def preprocess_case(case_dir: Path, roi: Sequence[int] = ROI_SHAPE) -> Preprocessed:
    """Steps 1-5 for one raw case folder."""
    image, label, spacing = load_pair(case_dir)  # (1, D, H, W): the reference zooms the volumes
    if image.shape != label.shape:
        raise DataError(f"{case_dir.name}: image shape {image.shape[1:]} differs from label shape {label.shape[1:]}")
    volume, labels, factor = resample(image[0], label[0], spacing)
    image, label = np.expand_dims(volume, 0), np.expand_dims(labels, 0)
    image = normalize(image.copy())
    image, label = pad_to_min_shape(image, label, tuple(roi))
    image, label = adjust_for_sliding_window(image, label, roi)
    return Preprocessed(image=image.astype(np.float32), label=label.astype(np.uint8), spacing=spacing, zoom=factor)


# ---- the reference's pickle, written and read -----------------------------------------------------

RECONSTRUCT = ("numpy.core.multiarray", "_reconstruct")
"""Where NumPy 1.x (the reference's) says an array is rebuilt from; NumPy 2 keeps it importable."""
_ALLOWED = {RECONSTRUCT, ("numpy._core.multiarray", "_reconstruct"), ("numpy", "ndarray"), ("numpy", "dtype")}


class _ReferencePickler(pickle._Pickler):  # type: ignore[name-defined,misc]  # the pure-Python pickler: its
    # save_global can be told where NumPy 1.x found its array constructor; every other byte is the C pickler's.
    def save_global(self, obj: object, name: str | None = None) -> None:
        if obj is np._core.multiarray._reconstruct:  # type: ignore[attr-defined]
            module, attribute = RECONSTRUCT
            self.save(module)
            self.save(attribute)
            self.write(pickle.STACK_GLOBAL)
            self.memoize(obj)
            return
        super().save_global(obj, name)


def pickle_bytes(image: np.ndarray, label: np.ndarray) -> bytes:
    """What the reference's ``pickle.dump([image, label], f)`` writes under Python 3.8 and NumPy 1.x."""
    buffer = io.BytesIO()
    _ReferencePickler(buffer, protocol=PICKLE_PROTOCOL).dump([image, label])
    return buffer.getvalue()


class _ArraysOnly(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> object:
        if (module, name) not in _ALLOWED:
            raise pickle.UnpicklingError(f"{module}.{name} is not a NumPy array part")
        return np._core.multiarray._reconstruct if name == "_reconstruct" else getattr(np, name)  # type: ignore[attr-defined]


def read_case(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """(image, label) of a ``case_XXXXX.pkl``; DataError naming the file when it is not the
    reference's two arrays (nothing else in it is ever run: only NumPy arrays are rebuilt)."""
    try:
        with path.open("rb") as handle:
            value = _ArraysOnly(handle).load()
    except (OSError, EOFError, ValueError, pickle.UnpicklingError, AttributeError, TypeError) as exc:
        raise DataError(f"{path}: not a preprocessed KiTS19 case ({type(exc).__name__}: {exc})") from None
    if (not isinstance(value, list) or len(value) != 2 or not all(isinstance(a, np.ndarray) for a in value)
            or value[0].dtype != np.float32 or value[1].dtype != np.uint8 or value[0].shape != value[1].shape
            or value[0].ndim != 4):
        raise DataError(f"{path}: not [image float32, label uint8] of one shape (1, D, H, W)")
    return value[0], value[1]


def md5(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()
