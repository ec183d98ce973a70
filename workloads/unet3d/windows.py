"""The sliding window's geometry, the reference's (``retired_benchmarks/unet3d/pytorch/runtime/inference.py``):
the trim of each axis, the padding up to whole strides and the windows' start corners. Plain integers
and NumPy-free, so that what reads only the geometry (the inference dataset's cache check) starts
without torch or SciPy; `evaluate` runs the windows."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

PAD_VALUE = -2.2


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
