"""Which MLPerf division a llama31_8b run may claim.

``closed`` only when every value the closed rules (or the RCP for the run's global batch) fix is the
reference's: the model's shape, sequence length, the optimizer and its schedule, evaluation cadence
and size, the target; the data is MLCommons' C4 (not synthetic); the seed was drawn at random; and
the run is not cut short by a step cap. Otherwise ``open``, with every reason in one sentence. An
environment may force ``open``, never ``closed``.
"""

from __future__ import annotations

from dataclasses import dataclass

from workloads.llama31_8b import rcp
from workloads.llama31_8b.config import SHAPE_FIELDS, TrainConfig, closed

FIXED_FIELDS = (*SHAPE_FIELDS, "base_lr", "end_lr_ratio", "warmup_samples", "max_steps", "beta1", "beta2", "eps",
                "weight_decay", "clip", "eval_every", "start_eval_at", "eval_samples", "target")
MAX_LISTED = 4


@dataclass(frozen=True, kw_only=True)
class Division:
    label: str
    reason: str


def differences(config: TrainConfig) -> list[str]:
    reference = closed(config.global_batch)
    return [f"{name} {getattr(config, name)} differs from the reference {getattr(reference, name)}"
            for name in FIXED_FIELDS if getattr(config, name) != getattr(reference, name)]


def decide(config: TrainConfig, *, synthetic_data: bool, seed_random: bool, force_open: bool = False) -> Division:
    reasons = []
    if rcp.find(config.global_batch) is None:
        reasons.append(f"no RCP for global batch {config.global_batch} in the {rcp.RULESET} table (it holds "
                       f"{rcp.batches()})")
    found = differences(config)
    if found:
        reasons.append("; ".join(found[:MAX_LISTED]) + (" ..." if len(found) > MAX_LISTED else ""))
    if synthetic_data:
        reasons.append("the data is synthetic, not MLCommons' C4")
    if config.stop_after_steps:
        reasons.append(f"stopped after {config.stop_after_steps} steps whatever the quality")
    if not seed_random:
        reasons.append("seed fixed by the caller")
    if force_open:
        reasons.append("SUBMISSION_DIVISION=open")
    return Division(label="open", reason="; ".join(reasons)) if reasons else Division(label="closed", reason="")
