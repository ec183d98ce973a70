"""The sliding window's rules, the reference's (``retired_benchmarks/unet3d/pytorch/runtime/inference.py``):
the trim of each axis, the padding up to whole strides, the windows' start corners and the Gaussian
importance map that blends them; and `numpy_sliding_window_logits`, the windows run on NumPy arrays
(the inference harness's, on the host: it never imports torch), the twin of `evaluate`'s torch
``sliding_window_logits`` (training's evaluation, on the model's device), both built on these rules
and held bit for bit equal by ``tests/inference/test_kits19.py``. The geometry is plain integers, and
SciPy's signal processing is imported only where the map is made, so that what reads only the
geometry (the inference dataset's cache check) starts without torch or SciPy."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from functools import lru_cache

import numpy as np

PAD_VALUE = -2.2
GAUSSIAN_SIGMA_SCALE = 0.125


def trim_slices(shape: tuple[int, ...], strides: tuple[int, ...]) -> tuple[slice, ...]:
    """Per axis: crop r = size % stride (r // 2 in front) when r < stride // 2, else nothing."""
    slices = []
    for size, stride in zip(shape, strides, strict=True):
        r = size % stride
        r = r if r < stride // 2 else 0
        slices.append(slice(r // 2, size - (r - r // 2)))
    return tuple(slices)


def padding(shape: tuple[int, ...], window: tuple[int, ...], strides: tuple[int, ...]) -> list[tuple[int, int]]:
    """(before, after) per axis: up to a multiple of the stride, one stride more if below a window."""
    pads = []
    for size, win, stride in zip(shape, window, strides, strict=True):
        pad = (stride - size % stride) % stride
        if size + pad < win:
            pad += stride
        pads.append((pad // 2, pad - pad // 2))
    return pads


def window_starts(padded_shape: Sequence[int], window: Sequence[int], strides: Sequence[int]) -> list[tuple[int, ...]]:
    """Start corner of every window, in the reference's order (last axis fastest)."""
    ranges = [range(0, n - w + 1, s) for n, w, s in zip(padded_shape, window, strides, strict=True)]
    return list(itertools.product(*ranges))


@lru_cache(maxsize=4)
def importance_map(window: tuple[int, int, int]) -> np.ndarray:
    """Gaussian blending weights (float32, max 1): outer product of 1-D windows, cube root."""
    from scipy.signal.windows import gaussian

    g = [gaussian(n, GAUSSIAN_SIGMA_SCALE * n) for n in window]
    weights = np.cbrt(np.einsum("i,j,k->ijk", g[0], g[1], g[2]))
    weights /= weights.max()
    return weights.astype(np.float32)


def numpy_sliding_window_logits(
    model: Callable[[np.ndarray], np.ndarray],
    image: np.ndarray,
    window: tuple[int, int, int],
    overlap: float = 0.5,
    batch: int = 1,
) -> np.ndarray:
    """Blended logits of ``image`` (1, C_in, D, H, W) float32, already trimmed: -> (1, n_classes, D, H, W)
    float32, in NumPy on the host.

    The twin of ``workloads.unet3d.evaluate.sliding_window_logits`` (torch, on the model's device),
    held bit for bit equal to it by ``tests/inference/test_kits19.py``: the same padding, the same
    windows in the same order, ``batch`` per ``model`` call ((batch, C_in, *window), the last call
    fewer), each window's logits times the same weights summed in float32, then divided by the summed
    weights. A volume that needs no padding is used as it is, not copied.
    """
    if batch < 1:
        raise ValueError(f"batch must be >= 1, got {batch}")
    shape = tuple(image.shape[2:])
    strides = tuple(int(w * (1 - overlap)) for w in window)
    pads = padding(shape, window, strides)
    if any(p for before_after in pads for p in before_after):
        image = np.pad(image, [(0, 0), (0, 0), *pads], mode="constant", constant_values=PAD_VALUE)
    padded_shape = tuple(image.shape[2:])
    weights = importance_map(tuple(window))  # (*window)
    result: np.ndarray | None = None
    product: np.ndarray | None = None
    norm = np.zeros(padded_shape, np.float32)
    boxes = [
        tuple(slice(a, a + w) for a, w in zip(start, window, strict=True))
        for start in window_starts(padded_shape, window, strides)
    ]
    for first in range(0, len(boxes), batch):
        chunk = boxes[first : first + batch]
        windows = np.concatenate([image[(..., *box)] for box in chunk])  # (n, C_in, *window)
        logits = np.asarray(model(windows), dtype=np.float32)  # (n, n_classes, *window)
        if result is None or product is None:
            result = np.zeros((1, logits.shape[1], *padded_shape), np.float32)
            product = np.empty(logits.shape[1:], np.float32)
        for box, window_logits in zip(chunk, logits[: len(chunk)], strict=True):
            np.multiply(window_logits, weights, out=product)
            blended = result[(0, slice(None), *box)]
            np.add(blended, product, out=blended)
            covered = norm[box]
            np.add(covered, weights, out=covered)
    assert result is not None  # at least one window: the padding guarantees it
    np.divide(result, norm, out=result)
    crop = tuple(slice(before, before + size) for (before, _), size in zip(pads, shape, strict=True))
    return result[(..., *crop)]
