"""The harness's warm-up measures the rate the test will run at: a model whose calls are slow (a whole
3D volume per call) is timed through the test's workers, its samples' costs scaled to the dataset's;
and a one-query-at-a-time test its time limit will cut short of LoadGen's minimum is said beforehand."""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from workloads.inference.backends import Loaded
from workloads.inference.sut import Batching, Samples
from workloads.inference.targets import cut_short
from workloads.inference.warmup import warm_up

CALL_S = 0.08


class Sleeper:
    """A backend whose call takes CALL_S without holding the GIL (as ONNX Runtime's does)."""

    loaded = Loaded(backend="sleep", providers=("cpu",), load_s=0.0, input_name="x", input_shape=("N", 1, 4, 4, 4))

    def predict(self, batch: np.ndarray) -> list[np.ndarray]:
        time.sleep(CALL_S * len(batch))
        return [batch[:, :1]]

    def stop_trace(self) -> tuple[Path | None, list[Any]]:
        return None, []


class Volumes:
    """A per-sample model (one whole volume per sample, answered by ``infer``), ``costs`` per sample."""

    def __init__(self, costs: list[float]) -> None:
        self.costs = costs

    @property
    def count(self) -> int:
        return len(self.costs)

    def load(self, index: int) -> np.ndarray:
        return np.zeros((1, 4, 4, 4), np.float32)

    def cost(self, index: int) -> float:
        return self.costs[index]

    def infer(self, backend: Any, image: np.ndarray, batching: Batching) -> np.ndarray:
        batching.predict(backend, image[None])
        return np.zeros(8, np.uint8)


def test_a_slow_model_s_offline_rate_is_timed_through_the_test_s_workers():
    """Two workers answer two volumes at once: the rate is twice one call's (before: one call at a
    time, 1.41 samples/s where the test ran 2.62, and "min duration not met")."""
    model = Volumes([1.0] * 6)
    measured = warm_up(model, Sleeper(), Samples(model), Batching(max_batch=1), scenario="Offline", count=model.count,
                       workers=2, seconds=2.0, calls=(2, 0))
    one_call = 1 / CALL_S
    assert measured["throughput_qps"] == pytest.approx(2 * one_call, rel=0.25)
    assert measured["samples"] >= 2


def test_the_rate_is_scaled_from_the_samples_timed_to_the_dataset_s_mean_cost():
    """The warm-up times the first two cases; the dataset's others cost six times as much each."""
    model = Volumes([1.0, 1.0] + [6.0] * 4)
    measured = warm_up(model, Sleeper(), Samples(model), Batching(max_batch=1), scenario="Offline", count=model.count,
                       workers=2, seconds=2.0, calls=(2, 0))
    mean = sum(model.costs) / len(model.costs)
    assert measured["throughput_qps"] == pytest.approx(2 / CALL_S / mean, rel=0.25)


def settings(max_ms: int, least: int) -> SimpleNamespace:
    return SimpleNamespace(max_duration_ms=max_ms, min_query_count=least)


def test_a_singlestream_test_its_time_limit_cuts_short_is_said_before_it_runs():
    said = cut_short(settings(60_000, 360), {"latency_ms": 620.0, "batch_ms": 620.0}, "SingleStream")
    assert said is not None
    assert "stops at its 60 s limit after about 97 of the 360 queries LoadGen requires" in said
    assert "INVALID (min queries not met)" in said and "--time 268" in said
    assert cut_short(settings(60_000, 360), {"latency_ms": 100.0, "batch_ms": 100.0}, "SingleStream") is None
    assert cut_short(settings(0, 360), {"latency_ms": 620.0, "batch_ms": 620.0}, "SingleStream") is None
    assert cut_short(settings(60_000, 360), {"latency_ms": 620.0, "batch_ms": 620.0}, "Offline") is None
