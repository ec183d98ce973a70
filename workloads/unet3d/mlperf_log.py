"""MLLOG output of one run through ``mlperf_logging.mllog``: stdout and a file, rank 0 only.

Each run gets its own ``MLLogger`` over its own (unregistered) ``logging.Logger``, so two runs
in one process (tests) never share handlers. Every key is an ``mllog.constants`` name or one of
the named constants below: the strings the reference logs and the checker's
``closed_unet3d.yaml`` asks for, and mltrain's own keys.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

from mlperf_logging.mllog.mllog import MLLogger

# Keys of the unet3d benchmark that mlperf_logging.mllog.constants does not define.
OPT_MOMENTUM = "opt_momentum"
OVERSAMPLING = "oversampling"
TRAINING_INPUT_SHAPE = "training_input_shape"
VALIDATION_INPUT_SHAPE = "validation_input_shape"
VALIDATION_OVERLAP = "validation_overlap"
SAMPLES_PER_EPOCH = "samples_per_epoch"

# mltrain's keys (the orchestrator reads them from the log).
RESOLVED_SETTINGS = "resolved_settings"
"""What precision, threads and device the run resolved (``auto``); once, before run_start."""
THROUGHPUT = "throughput"
"""Samples/s of the throughput mode; its last line."""


class MlperfLog:
    """``start``/``end``/``event`` as in mllog; a no-op on ranks other than 0."""

    def __init__(self, path: Path | None, enabled: bool = True) -> None:
        self.enabled = enabled
        self._handlers: list[logging.Handler] = []
        if not enabled:
            return
        logger = logging.Logger("unet3d.mllog", level=logging.INFO)
        logger.propagate = False
        self._handlers.append(logging.StreamHandler(stream=sys.stdout))
        if path is not None:
            self._handlers.append(logging.FileHandler(path, mode="w"))
        for handler in self._handlers:
            handler.setLevel(logging.INFO)
            logger.addHandler(handler)
        # stack offset 2: the file/line recorded is the caller of start/end/event, not this module
        self._mllog = MLLogger(logger=logger, default_stack_offset=2)

    def start(self, key: str, value: Any = None, metadata: dict | None = None) -> None:
        if self.enabled:
            self._mllog.start(key=key, value=value, metadata=metadata)

    def end(self, key: str, value: Any = None, metadata: dict | None = None) -> None:
        if self.enabled:
            self._mllog.end(key=key, value=value, metadata=metadata)

    def event(self, key: str, value: Any = None, metadata: dict | None = None) -> None:
        if self.enabled:
            self._mllog.event(key=key, value=value, metadata=metadata)

    def close(self) -> None:
        for handler in self._handlers:
            handler.flush()
            handler.close()
        self._handlers.clear()
