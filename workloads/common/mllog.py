"""MLLOG output of one run through ``mlperf_logging.mllog``: stdout and a file, rank 0 only.

Each ``MlperfLog`` has its own ``MLLogger`` over its own unregistered ``logging.Logger``, so two
runs in one process (tests) never share handlers and none is left in ``logging``'s registry.
Every key is an ``mllog.constants`` name, one of mltrain's keys below (the workload contract's,
read by the orchestrator), or a benchmark's own key, named in that workload's module.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType

from mlperf_logging.mllog.mllog import MLLogger

RESOLVED_SETTINGS = "resolved_settings"
"""mltrain's key: what precision, threads and device the run resolved (``auto``); once, before run_start."""
CUTS = "cuts"
"""mltrain's key: what a run left out of the benchmark's data (a smoke run on real data), its value a
dict whose ``text`` says it in a sentence; once, after run_start, and only when something was cut."""
THROUGHPUT = "throughput"
"""mltrain's key: samples/s of the throughput mode; its last line."""


class MlperfLog:
    """``start``/``end``/``event`` as in mllog, to stdout and ``path``; a no-op when not ``enabled``
    (ranks other than 0)."""

    def __init__(self, path: Path | None = None, *, enabled: bool = True) -> None:
        self.enabled = enabled
        self._handlers: list[logging.Handler] = []
        logger = logging.Logger("workloads.mllog", level=logging.INFO)
        logger.propagate = False
        if enabled:
            self._handlers.append(logging.StreamHandler(stream=sys.stdout))
            if path is not None:
                path.parent.mkdir(parents=True, exist_ok=True)
                self._handlers.append(logging.FileHandler(path, mode="w"))
        for handler in self._handlers:
            handler.setLevel(logging.INFO)
            logger.addHandler(handler)
        # stack offset 2: the file/line recorded is the caller of start/end/event, not this module
        self._mllog = MLLogger(logger=logger, default_stack_offset=2)

    def start(self, key: str, value: object = None, metadata: dict | None = None) -> None:
        if self.enabled:
            self._mllog.start(key=key, value=value, metadata=metadata)

    def end(self, key: str, value: object = None, metadata: dict | None = None) -> None:
        if self.enabled:
            self._mllog.end(key=key, value=value, metadata=metadata)

    def event(self, key: str, value: object = None, metadata: dict | None = None) -> None:
        if self.enabled:
            self._mllog.event(key=key, value=value, metadata=metadata)

    def close(self) -> None:
        for handler in self._handlers:
            handler.flush()
            handler.close()
        self._handlers.clear()

    def __enter__(self) -> MlperfLog:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()


def last_eval_accuracy(logs: Iterable[Path]) -> float | None:
    """The value of the last ``eval_accuracy`` MLLOG line in ``logs`` (read in order); None if none."""
    accuracy = None
    for path in logs:
        for line in path.read_text().splitlines():
            if '"key": "eval_accuracy"' in line:
                accuracy = float(json.loads(line.split(":::MLLOG", 1)[1])["value"])
    return accuracy
