"""The resnet50 benchmark's MLLOG keys: the closed_resnet rules' keys that mlperf_logging has no
constant for, and the optimizer's hyperparameters under the keys the rules ask for. The logger and
mltrain's own keys are the kit's (``workloads.common.mllog``).
"""

from __future__ import annotations

from mlperf_logging import mllog

LOG_FILE = "mllog.txt"
"""The MLLOG file in the results folder."""

# Keys the closed_resnet_sgd rules (training_3.1.0/closed_resnet_sgd.yaml, enqueued by ruleset 4.0.0)
# require but mlperf_logging 4.1.68 has no constant for.
SGD_OPT_BASE_LEARNING_RATE = "sgd_opt_base_learning_rate"
SGD_OPT_END_LR = "sgd_opt_end_learning_rate"
SGD_OPT_LR_DECAY_POLY_POWER = "sgd_opt_learning_rate_decay_poly_power"
SGD_OPT_LR_DECAY_STEPS = "sgd_opt_learning_rate_decay_steps"
SGD_OPT_WEIGHT_DECAY = "sgd_opt_weight_decay"
SGD_OPT_MOMENTUM = "sgd_opt_momentum"


def optimizer_keys(*, optimizer: str, base_lr: float, end_lr: float, power: float, decay_steps: int,
                   warmup_epochs: float, momentum: float, weight_decay: float,
                   lars_epsilon: float) -> dict[str, object]:
    """The optimizer hyperparameters under the keys the closed_resnet rules ask for."""
    c = mllog.constants
    if optimizer == "lars":
        return {
            c.LARS_OPT_BASE_LEARNING_RATE: base_lr,
            c.LARS_OPT_END_LR: end_lr,
            c.LARS_OPT_LR_DECAY_POLY_POWER: power,
            c.LARS_OPT_LR_DECAY_STEPS: decay_steps,
            c.LARS_OPT_LEARNING_RATE_WARMUP_EPOCHS: warmup_epochs,
            c.LARS_OPT_MOMENTUM: momentum,
            c.LARS_OPT_WEIGHT_DECAY: weight_decay,
            c.LARS_EPSILON: lars_epsilon,
        }
    return {
        SGD_OPT_BASE_LEARNING_RATE: base_lr,
        SGD_OPT_END_LR: end_lr,
        SGD_OPT_LR_DECAY_POLY_POWER: power,
        SGD_OPT_LR_DECAY_STEPS: decay_steps,
        c.OPT_LR_WARMUP_EPOCHS: warmup_epochs,
        SGD_OPT_MOMENTUM: momentum,
        SGD_OPT_WEIGHT_DECAY: weight_decay,
    }
