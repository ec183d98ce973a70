"""Which MLPerf division a run may call itself: ``closed`` only with every value the rules fix.

The unet3d rules fix the model, the patch (128^3), the evaluation window (128^3) and overlap
(0.5), the oversampling (0.4), the evaluation schedule (1000 and 20 epochs of 168 samples,
scaled by samples per epoch), the quality target (0.908) and the data (KiTS19's 210 cases with
the reference's 168/42 split); batch size, learning rates, warm-up, decay and momentum are free.
Closed-division seeds must be random: drawn here (seed -1) or by the caller, who says so with
``MLTRAIN_SEEDS_RANDOM=1``. Anything else is ``open``, with the reasons logged beside the label.

Decided before run_start from the configuration and the dataset's file NAMES (no file is opened).
"""

from __future__ import annotations

import dataclasses

from workloads.unet3d.config import TrainConfig, resolve_schedule
from workloads.unet3d.model import CLOSED_FILTERS
from workloads.unet3d.split import MAX_CASE_ID, Listing, case_name

REFERENCE_SHAPE = (128, 128, 128)
REFERENCE_OVERLAP = 0.5
REFERENCE_OVERSAMPLING = 0.4
REFERENCE_TARGET = 0.908
REFERENCE_TRAIN_CASES = 168


def _shape(shape: tuple[int, ...]) -> str:
    return ",".join(str(n) for n in shape)


def open_reasons(config: TrainConfig, listing: Listing, world_size: int) -> list[str]:
    """Why this run cannot be closed (empty: it may be)."""
    reasons = []
    if config.force_open:
        reasons.append(f"{config.force_open} asks for open")
    if not config.model.is_closed:
        reasons.append(f"FILTERS {_shape(config.model.filters)} differ from the reference {_shape(CLOSED_FILTERS)}")
    if config.input_shape != REFERENCE_SHAPE:
        reasons.append(f"INPUT_SHAPE {_shape(config.input_shape)} differs from the reference 128,128,128")
    if config.val_input_shape != REFERENCE_SHAPE:
        reasons.append(f"VAL_INPUT_SHAPE {_shape(config.val_input_shape)} differs from the reference 128,128,128")
    if config.overlap != REFERENCE_OVERLAP:
        reasons.append(f"overlap {config.overlap} differs from the reference {REFERENCE_OVERLAP}")
    if config.oversampling != REFERENCE_OVERSAMPLING:
        reasons.append(f"OVERSAMPLING {config.oversampling} differs from the reference {REFERENCE_OVERSAMPLING}")
    if config.quality_threshold != REFERENCE_TARGET:
        reasons.append(f"target {config.quality_threshold} differs from the reference {REFERENCE_TARGET}")
    reasons += _schedule_reasons(config, world_size)
    wanted = {case_name(i) for i in range(MAX_CASE_ID)}
    if listing.has_split_file or listing.images != wanted or listing.labels != wanted:
        own_split = " and its own split.json" if listing.has_split_file else ""
        reasons.append(f"the dataset has {len(listing.images)} cases{own_split}, not KiTS19's {MAX_CASE_ID} "
                       "with the reference split")
    if config.seed != -1 and not config.seeds_random:
        reasons.append("seed fixed by the caller")
    return reasons


def _schedule_reasons(config: TrainConfig, world_size: int) -> list[str]:
    """The evaluation schedule must be the rules' for this run's samples per epoch."""
    try:
        rules = resolve_schedule(
            dataclasses.replace(config, start_eval_at=None, evaluate_every=None), REFERENCE_TRAIN_CASES, world_size
        )
    except ValueError as err:
        return [str(err)]
    reasons = []
    if config.start_eval_at is not None and config.start_eval_at != rules.start_eval_at:
        reasons.append(f"START_EVAL_AT {config.start_eval_at} differs from the rules' {rules.start_eval_at}")
    if config.evaluate_every is not None and config.evaluate_every != rules.evaluate_every:
        reasons.append(f"EVALUATE_EVERY {config.evaluate_every} differs from the rules' {rules.evaluate_every}")
    return reasons


def division(config: TrainConfig, listing: Listing, world_size: int) -> tuple[str, str | None]:
    """('closed', None) or ('open', the reasons in one sentence)."""
    reasons = open_reasons(config, listing, world_size)
    return ("open", "; ".join(reasons)) if reasons else ("closed", None)
