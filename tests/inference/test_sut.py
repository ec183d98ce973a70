"""The harness's system under test against the real LoadGen, with a backend double: every answer
is the one its sample asked for in every scenario (Offline's batches are gathered ahead in LoadGen's
issuing thread, Server's merged by the workers), and a backend that fails during a test (a device
lost) ends the test with one line instead of leaving LoadGen waiting for ever."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from workloads.common.errors import EXIT_FAILURE, Failure
from workloads.inference.backends import Loaded
from workloads.inference.sut import Samples, Server

lg = pytest.importorskip("mlperf_loadgen")

SAMPLES = 40
SCENARIOS = ("SingleStream", "MultiStream", "Server", "Offline")


class Numbered:
    """A QSL model whose sample ``i`` is filled with ``i``; a response carries the value predicted."""

    def __init__(self) -> None:
        self.answered: list[tuple[int, float]] = []
        self.lock = threading.Lock()

    def load(self, index: int) -> np.ndarray:
        return np.full((3, 4, 4), float(index), dtype=np.float32)

    def respond(self, outputs: Sequence[np.ndarray], indices: Sequence[int]) -> list[np.ndarray]:
        values = outputs[0]
        with self.lock:
            self.answered += [(index, float(value)) for index, value in zip(indices, values, strict=True)]
        return [np.array([value], dtype=np.float32) for value in values]


class Echo:
    """A backend that answers each sample with its first value; after ``fail_after`` calls it raises
    what a CUDA device that fell off the bus raises."""

    def __init__(self, fail_after: int | None = None) -> None:
        self.calls = 0
        self.fail_after = fail_after
        self.lock = threading.Lock()
        self.loaded = Loaded(backend="echo", providers=("cpu",), load_s=0.0, input_name="x",
                             input_shape=(None, 3, 4, 4))

    def predict(self, batch: np.ndarray) -> Sequence[np.ndarray]:
        with self.lock:
            self.calls += 1
            calls = self.calls
        if self.fail_after is not None and calls > self.fail_after:
            raise RuntimeError("CUDA error: unspecified launch failure\n(device lost)")
        return [batch[:, 0, 0, 0].copy()]

    def stop_trace(self) -> tuple[Path | None, list[Any]]:
        return None, []


def run_test(scenario: str, backend: Echo, out: Path) -> tuple[Server, Numbered]:
    model = Numbered()
    samples = Samples(model)
    server = Server(lg, model, backend, samples, scenario=scenario, max_batch=8, workers=2)
    settings = lg.TestSettings()
    settings.scenario = getattr(lg.TestScenario, scenario)
    settings.mode = lg.TestMode.PerformanceOnly
    settings.min_duration_ms = settings.max_duration_ms = 300
    settings.min_query_count = 1
    settings.offline_expected_qps = 2000
    settings.server_target_qps = 500
    settings.single_stream_expected_latency_ns = 200_000
    settings.multi_stream_expected_latency_ns = 400_000
    settings.performance_sample_count_override = SAMPLES
    log = lg.LogSettings()
    log.log_output.outdir = str(out)
    log.log_output.copy_summary_to_stdout = False
    out.mkdir()
    sut = lg.ConstructSUT(server.issue, server.flush)
    qsl = lg.ConstructQSL(SAMPLES, SAMPLES, samples.load, samples.unload)
    test = threading.Thread(target=lg.StartTestWithLogSettings, args=(sut, qsl, settings, log), daemon=True)
    test.start()
    test.join(timeout=120)
    assert not test.is_alive(), f"LoadGen is still waiting for answers ({scenario})"
    server.close()
    lg.DestroyQSL(qsl)
    lg.DestroySUT(sut)
    return server, model


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_each_answer_is_computed_from_its_own_sample(scenario: str, tmp_path: Path):
    server, model = run_test(scenario, Echo(), tmp_path / "logs")
    assert server.failure is None
    timings = server.reset()
    assert model.answered and timings.samples == len(model.answered)
    assert all(float(index) == value for index, value in model.answered)
    assert timings.batches <= timings.samples
    if scenario == "Offline":  # the one query is cut into full batches but for the last
        assert timings.batches == -(-timings.samples // 8)
    server.raise_failure("performance")  # no failure: nothing raised


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_a_backend_failing_mid_test_ends_the_test_with_its_error(scenario: str, tmp_path: Path):
    server, model = run_test(scenario, Echo(fail_after=3), tmp_path / "logs")
    assert len(model.answered) > 0  # three calls answered, the rest answered empty
    with pytest.raises(Failure) as raised:
        server.raise_failure("performance")
    message = str(raised.value)
    assert message == ("the backend failed during the performance test: RuntimeError: CUDA error: unspecified "
                       "launch failure (device lost)")
    assert raised.value.exit_code == EXIT_FAILURE
