"""What a run may leave out of the benchmark's data, and the sentence that says so.

The benchmark trains on every training case and evaluates every evaluation case whole. A smoke
run on real data (KiTS19 preprocessed to 128^3 and larger volumes) cannot: a 24^3 sliding window
over one 160x256x256 case takes minutes on two CPU cores. Three knobs (``EVAL_CASES``,
``EVAL_CROP``, ``TRAIN_CASES``, see config.py) cut it down; none is set by default, and a run with
any of them set logs the ``cuts`` MLLOG event (``workloads.common.mllog.CUTS``) with what it cut,
and is never in the closed division.

Cases are cut by taking the first N of the split's lists (deterministic, the same on every rank
and seed). An evaluation volume is cropped to at most the given size, centred on its largest kidney
(with its tumour): the Dice is scored on that box, kidney, tumour and the background around them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from workloads.unet3d.augment import largest_component_boxes


@dataclass(frozen=True, kw_only=True)
class Cuts:
    """The cut a run was asked for; all None: the benchmark's data, whole."""

    eval_cases: int | None = None
    """Evaluate only the first N evaluation cases; None: all."""
    eval_crop: tuple[int, int, int] | None = None
    """Crop each evaluation volume to at most (D, H, W) around its foreground; None: whole volumes."""
    train_cases: int | None = None
    """Train on only the first N training cases; None: all."""

    def __post_init__(self) -> None:
        for name in ("eval_cases", "train_cases"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
        if self.eval_crop is not None and min(self.eval_crop) < 1:
            raise ValueError(f"eval crop {self.eval_crop}: every side must be >= 1")

    @property
    def any(self) -> bool:
        return (self.eval_cases, self.eval_crop, self.train_cases) != (None, None, None)

    def select(self, train: Sequence[str], evaluation: Sequence[str]) -> tuple[list[str], list[str]]:
        """The training and evaluation cases the run uses."""
        return list(train[: self.train_cases]), list(evaluation[: self.eval_cases])

    def log_value(self, train: Sequence[str], evaluation: Sequence[str]) -> dict[str, object]:
        """The ``cuts`` event's value for the split ``train``/``evaluation`` (before the cut)."""
        used_train, used_eval = self.select(train, evaluation)
        said = [f"evaluated {len(used_eval)} of {len(evaluation)} cases"]
        if self.eval_crop is not None:
            said[0] += f", cropped to at most {'x'.join(map(str, self.eval_crop))} around a kidney"
        said.append(f"trained on {len(used_train)} of {len(train)} cases")
        return {
            "eval_cases": len(used_eval), "eval_cases_of": len(evaluation),
            "eval_crop": list(self.eval_crop) if self.eval_crop is not None else None,
            "train_cases": len(used_train), "train_cases_of": len(train),
            "text": "; ".join(said),
        }


def foreground_crop(label: np.ndarray, size: Sequence[int]) -> tuple[slice, ...]:
    """Slices of ``label`` (1, D, H, W) for a box of at most ``size`` centred on the bounding box of
    its largest foreground component (a kidney with its tumour; KiTS19's two kidneys lie apart, so
    a box around both would centre on the spine), moved inside the volume; the volume's centre
    when it has no foreground."""
    spatial = label.shape[1:]
    boxes = largest_component_boxes((label > 0).astype(np.uint8), 1, keep=1)
    slices: list[slice] = [slice(None)]
    for axis, (extent, want) in enumerate(zip(spatial, size, strict=True)):
        side = min(extent, want)
        centre = (boxes[0][axis].start + boxes[0][axis].stop) // 2 if boxes else extent // 2
        start = min(max(centre - side // 2, 0), extent - side)
        slices.append(slice(start, start + side))
    return tuple(slices)
