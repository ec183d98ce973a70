"""Which MLPerf division a run may claim (issue 12 item 6, the workload conventions).

``closed`` only when every value the closed rules fix is the reference's (model shape, crop,
evaluation schedule and target, the optimizer and its hyperparameters of the RCP for the run's
global batch), the data is ImageNet 2012, and the seed was drawn at random. Otherwise ``open``,
with the reasons in one sentence. An environment may force ``open``, never ``closed``.
"""

from __future__ import annotations

from dataclasses import dataclass

from workloads.resnet50 import rcp
from workloads.resnet50.config import TrainConfig, closed
from workloads.resnet50.layout import IMAGENET_CLASSES, IMAGENET_COUNTS

FIXED_FIELDS = ("width", "layers", "crop", "eval_resize", "optimizer", "base_lr", "end_lr", "poly_power",
                "warmup_epochs", "momentum", "weight_decay", "lars_eta", "lars_epsilon", "label_smoothing",
                "eval_every", "target")
"""TrainConfig fields whose reference value the closed rules (or the RCP) fix."""
MAX_LISTED = 4
"""Differing fields named in the reason before '...'."""


@dataclass(frozen=True, kw_only=True)
class Division:
    """The label and, for ``open``, why."""

    label: str
    """'closed' or 'open'."""
    reason: str
    """Empty for closed; one sentence for open."""


def _show(value: object) -> str:
    return ",".join(map(str, value)) if isinstance(value, tuple) else str(value)


def differences(config: TrainConfig, global_batch: int) -> list[str]:
    """'FIELD V differs from the reference R' for every fixed field off the reference at this batch."""
    reference = closed(global_batch)
    found = []
    for name in FIXED_FIELDS:
        ours, theirs = getattr(config, name), getattr(reference, name)
        if name == "decay_epochs" or ours == theirs:
            continue
        found.append(f"{name} {_show(ours)} differs from the reference {_show(theirs)}")
    ours_steps = round(config.decay_epochs * rcp.IMAGENET_TRAIN_IMAGES / global_batch)
    theirs_steps = round(reference.decay_epochs * rcp.IMAGENET_TRAIN_IMAGES / global_batch)
    if ours_steps != theirs_steps:
        found.append(f"decay steps {ours_steps} differ from the reference {theirs_steps}")
    return found


def decide(config: TrainConfig, *, global_batch: int, train_images: int, classes: int, seed_random: bool,
           force_open: bool = False) -> Division:
    """The division this run may log, from its config, its data and how its seed was chosen."""
    reasons = []
    found = differences(config, global_batch)
    if rcp.find(global_batch) is None:
        near = rcp.nearest(global_batch).global_batch
        used = "" if found else f"; hyperparameters of {near} used"
        reasons.append(f"no RCP for global batch {global_batch} in the {rcp.RULESET} tables (they hold "
                       f"{rcp.batches()}{used})")
    if found:
        more = " ..." if len(found) > MAX_LISTED else ""
        reasons.append("; ".join(found[:MAX_LISTED]) + more)
    if (train_images, classes) != (IMAGENET_COUNTS["train"], IMAGENET_CLASSES):
        reasons.append(f"dataset is not ImageNet 2012 ({train_images} training images in {classes} classes)")
    if not seed_random:
        reasons.append("seed fixed by the caller")
    if force_open:
        reasons.append("SUBMISSION_DIVISION=open")
    if reasons:
        return Division(label="open", reason="; ".join(reasons))
    return Division(label="closed", reason="")
