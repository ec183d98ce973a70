"""The reference convergence points of llama31_8b, read from the installed mlperf_logging
(``rcp_checker/training_<RULESET>/rcps_llama31_8b.json``): the learning rate and warmup a closed run
of a global batch uses. The RCP checker compares a result's samples to converge with the point of
its batch (interpolating between points)."""

from __future__ import annotations

import functools
import importlib.resources
import json
import math
from dataclasses import dataclass

RULESET = "6.1.0"
"""The MLPerf Training ruleset the workload targets (workload.yaml's)."""
BENCHMARK = "llama31_8b"


@dataclass(frozen=True, kw_only=True)
class RcpPoint:
    global_batch: int
    base_lr: float
    warmup_samples: int


@functools.cache
def points() -> tuple[RcpPoint, ...]:
    table = importlib.resources.files("mlperf_logging.rcp_checker") / f"training_{RULESET}" / f"rcps_{BENCHMARK}.json"
    records = json.loads(table.read_text())
    found = [RcpPoint(global_batch=int(r["BS"]), base_lr=float(r["Hyperparams"]["opt_base_learning_rate"]),
                      warmup_samples=int(r["Hyperparams"]["opt_learning_rate_warmup_samples"]))
             for r in records.values() if r.get("Benchmark") == BENCHMARK]
    return tuple(sorted(found, key=lambda point: point.global_batch))


def find(global_batch: int) -> RcpPoint | None:
    return next((point for point in points() if point.global_batch == global_batch), None)


def nearest(global_batch: int) -> RcpPoint:
    """The point whose batch is closest on a log scale."""
    return min(points(), key=lambda point: abs(math.log(point.global_batch / global_batch)))


def batches() -> str:
    return ", ".join(str(point.global_batch) for point in points())
