"""Sliding-window inference over whole volumes and the benchmark's mean-Dice accuracy.

The steps are those of the reference (``retired_benchmarks/unet3d/pytorch/runtime/inference.py``):
trim each axis by ``size % stride`` when that is less than half a stride, pad with -2.2 up to
a whole number of strides (at least one window), run windows at 0, stride, 2*stride ...,
blend them with a Gaussian importance map, then cut the padding away again.

Unlike the reference, several windows go through the model per call (``batch``), and the case,
the accumulators and the Dice all live on the model's device.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np
import torch

from workloads.unet3d.losses import dice_score
from workloads.unet3d.windows import PAD_VALUE, importance_map, padding, trim_slices, window_starts


def sliding_window_logits(
    model: Callable[[torch.Tensor], torch.Tensor],
    image: torch.Tensor,
    window: tuple[int, int, int],
    overlap: float = 0.5,
    batch: int = 1,
    memory_format: torch.memory_format = torch.contiguous_format,
    fixed_batch: bool = False,
) -> torch.Tensor:
    """Blended logits of ``image`` (1, C_in, D, H, W), already trimmed: -> (1, n_classes, D, H, W) fp32.

    Everything lives on ``image``'s device, which must be the model's. ``batch`` windows go through
    the model at once ((batch, C_in, *window) each call, the last call fewer, or as many with
    ``fixed_batch``: its last window repeated, for a compiled model that should see one shape); the
    blend is the same whatever the batch. Its twin on NumPy arrays, for the inference harness, is
    ``workloads.unet3d.windows.numpy_sliding_window_logits``: the same rules (geometry, weights), held
    bit for bit equal to this by ``tests/inference/test_kits19.py``.
    """
    if batch < 1:
        raise ValueError(f"batch must be >= 1, got {batch}")
    shape = tuple(image.shape[2:])
    strides = tuple(int(w * (1 - overlap)) for w in window)
    pads = padding(shape, window, strides)
    flat_pads = [p for before_after in reversed(pads) for p in before_after]  # F.pad: last axis first
    # a volume already padded (the inference reference's) is used as it is, not copied
    padded = torch.nn.functional.pad(image, flat_pads, mode="constant", value=PAD_VALUE) if any(flat_pads) else image
    padded_shape = tuple(padded.shape[2:])
    weights = torch.from_numpy(importance_map(tuple(window))).to(image.device, non_blocking=True)  # (*window)
    result: torch.Tensor | None = None
    norm = torch.zeros(padded_shape, dtype=torch.float32, device=image.device)
    boxes = [
        tuple(slice(a, a + w) for a, w in zip(start, window, strict=True))
        for start in window_starts(padded_shape, window, strides)
    ]
    for first in range(0, len(boxes), batch):
        chunk = boxes[first : first + batch]
        filler = [chunk[-1]] * (batch - len(chunk)) if fixed_batch else []
        windows = torch.cat([padded[(..., *box)] for box in chunk + filler])  # (n, C_in, *window)
        logits = model(windows.contiguous(memory_format=memory_format)).float()  # (n, n_classes, *window)
        if result is None:
            result = torch.zeros((1, logits.shape[1], *padded_shape), dtype=torch.float32, device=image.device)
        for box, window_logits in zip(chunk, logits[: len(chunk)], strict=True):
            result[(0, slice(None), *box)] += window_logits * weights
            norm[box] += weights
    assert result is not None  # at least one window: the padding guarantees it
    result /= norm
    crop = tuple(slice(before, before + size) for (before, _), size in zip(pads, shape, strict=True))
    return result[(..., *crop)]


def evaluate_case(
    model: Callable[[torch.Tensor], torch.Tensor],
    image: np.ndarray | torch.Tensor,
    label: np.ndarray | torch.Tensor,
    window: tuple[int, int, int],
    overlap: float = 0.5,
    *,
    device: torch.device | None = None,
    batch: int = 1,
    memory_format: torch.memory_format = torch.contiguous_format,
    fixed_batch: bool = False,
) -> torch.Tensor:
    """Dice of kidney and tumour, (2,) on ``device``, for one preprocessed case ``image`` (1, D, H, W), ``label`` same.

    ``device``: where the model is (default: the device of its first parameter, else the CPU); the
    case is copied there (without blocking, from pinned memory) and the whole computation stays there.
    """
    device = model_device(model) if device is None else device
    strides = tuple(int(w * (1 - overlap)) for w in window)
    trim = (slice(None), *trim_slices(tuple(image.shape[1:]), strides))
    x = _as_tensor(image).to(device, non_blocking=True)[trim][None]  # (1, 1, D', H', W'), trimmed on the device
    y = _as_tensor(label).to(device, non_blocking=True)[trim][None]
    logits = sliding_window_logits(model, x, window, overlap, batch, memory_format, fixed_batch)
    return dice_score(logits, y)


def _as_tensor(array: np.ndarray | torch.Tensor) -> torch.Tensor:
    if isinstance(array, torch.Tensor):
        return array
    return torch.from_numpy(array if array.flags.writeable else np.array(array))


def model_device(model: Callable[[torch.Tensor], torch.Tensor]) -> torch.device:
    """The device of a module's first parameter; the CPU for a parameterless callable."""
    if isinstance(model, torch.nn.Module):
        for parameter in model.parameters():
            return parameter.device
    return torch.device("cpu")


def mean_dice(per_case: Iterable[torch.Tensor]) -> tuple[float, float, float]:
    """(kidney, tumour, accuracy) averaged over cases; accuracy is the mean of the two."""
    scores = torch.stack(list(per_case)).mean(dim=0)
    kidney, tumour = float(scores[-2]), float(scores[-1])
    return kidney, tumour, (kidney + tumour) / 2
