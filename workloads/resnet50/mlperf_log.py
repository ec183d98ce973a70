"""MLPerf logging for one run: ``:::MLLOG`` lines from rank 0 only, to stdout and to a file.

Each run gets its own ``mllog.MLLogger`` over its own ``logging.Logger`` (so two runs in one
process, as in tests, never share handlers). Every key is an ``mllog.constants`` name or one of the
named constants below (keys the rules or mltrain use that mlperf_logging has no constant for).
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from mlperf_logging import mllog
from mlperf_logging.mllog.mllog import MLLogger

LOG_FILE = "mllog.txt"

RESOLVED_SETTINGS = "resolved_settings"
"""mltrain's key: what precision, threads and device the run resolved (``auto``), once before run_start."""
THROUGHPUT = "throughput"
"""mltrain's key: the samples/s of the throughput mode (its last line)."""


class MlperfLog:
    """start/end/event of mllog, or nothing at all on ranks other than 0."""

    def __init__(self, *, enabled: bool, results_dir: Path | None) -> None:
        self.enabled = enabled
        self._logger = logging.getLogger(f"workloads.resnet50.mlperf_log.{id(self)}")
        self._logger.propagate = False
        self._logger.setLevel(logging.INFO)
        self._handlers: list[logging.Handler] = []
        if enabled:
            self._handlers.append(logging.StreamHandler(sys.stdout))
            if results_dir is not None:
                results_dir.mkdir(parents=True, exist_ok=True)
                self._handlers.append(logging.FileHandler(results_dir / LOG_FILE, mode="w"))
        for handler in self._handlers:
            self._logger.addHandler(handler)
        self._mllogger = MLLogger(logger=self._logger, default_stack_offset=2)

    def event(self, key: str, value: object = None, metadata: dict | None = None) -> None:
        if self.enabled:
            self._mllogger.event(key=key, value=value, metadata=metadata)

    def start(self, key: str, value: object = None, metadata: dict | None = None) -> None:
        if self.enabled:
            self._mllogger.start(key=key, value=value, metadata=metadata)

    def end(self, key: str, value: object = None, metadata: dict | None = None) -> None:
        if self.enabled:
            self._mllogger.end(key=key, value=value, metadata=metadata)

    def close(self) -> None:
        for handler in self._handlers:
            handler.flush()
            self._logger.removeHandler(handler)
            handler.close()
        self._handlers.clear()


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
