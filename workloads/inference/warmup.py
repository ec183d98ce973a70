"""The warm-up: the test's own path (gathering, the workers, the responses) run before LoadGen's test
for a share of its duration, with LoadGen stood in for (`Rehearsal`), timed for the auto targets and
to say beforehand a test that will run long or stop short."""

from __future__ import annotations

import statistics
import threading
import time
from dataclasses import dataclass
from typing import Any

from workloads.inference import backends
from workloads.inference.sut import INLINE_SCENARIOS, Batching, Samples, Server

WARM_UP_SHARE, WARM_UP_MIN_S, WARM_UP_MAX_S = 0.05, 2.0, 10.0
"""The warm-up runs the test's own path for 5% of the test's duration, from 2 s to 10 s."""
RAMP_S = 0.5
"""How long the workers take to reach their pace (measured: about 0.45 s on a 2-CPU machine), not timed."""

WARM_UP_CALLS = (6, 4)
"""Single-sample and full-batch calls of the warm-up (the first of each untimed); a model module's
``WARM_UP_CALLS`` replaces it (a whole 3D volume per call)."""


class Rehearsal:
    """What `Server` calls of LoadGen, standing in for it in the warm-up: the answers are counted, so
    that the warm-up times the test's own path (gathering, the workers, the responses)."""

    def __init__(self) -> None:
        self.answered = 0
        self.done = threading.Condition()

    @staticmethod
    def QuerySampleResponse(query_id: int, data: int, size: int) -> None:  # noqa: N802 - LoadGen's name
        return None

    def QuerySamplesComplete(self, responses: list[Any]) -> None:  # noqa: N802 - LoadGen's name
        with self.done:
            self.answered += len(responses)
            self.done.notify_all()

    def wait_for(self, answered: int) -> None:
        with self.done:
            self.done.wait_for(lambda: self.answered >= answered)


@dataclass(frozen=True)
class Query:
    """A query sample as the SUT reads LoadGen's: its id and its sample's index."""

    id: int
    index: int


def warm_up_seconds(test_s: float) -> float:
    return min(max(WARM_UP_MIN_S, WARM_UP_SHARE * test_s), WARM_UP_MAX_S)


def warm_up(model: Any, backend: backends.Backend, samples: Samples, batches: Batching, *, scenario: str, count: int,
            workers: int, seconds: float, calls: tuple[int, int] = WARM_UP_CALLS) -> dict[str, float]:
    """Sustained timings of the test's own path, after a first call of each kind: a single sample
    and a batch answered in the caller's thread (the latency targets, at least ``calls`` of each and an
    eighth of ``seconds``), then, where the ``scenario`` has workers (Offline, Server), work through
    them for the rest of ``seconds``, their ramp not timed (the throughput target): batches, or for a
    model whose calls are slow (a whole 3D volume per call) rounds of one call per worker at once, as
    the test runs them (one call at a time measured 1.41 samples/s where the test's two workers ran
    2.62). A model whose samples differ in cost (``Model.cost``: 3D-UNet's windows per case) has the
    rate scaled from the samples timed to the mean of the dataset's. What LoadGen's schedule is
    planned from: a rate measured on one small batch once planned a "60 s" Offline test that ran 662 s."""
    stand_in = Rehearsal()
    inline = Server(stand_in, model, backend, samples, scenario="SingleStream", batching=batches, workers=1)
    rows = list(range(min(count, 2 * inline.max_batch)))
    samples.load(rows)
    ids = iter(range(1 << 62))

    def queries(n: int) -> list[Query]:
        return [Query(next(ids), rows[k % len(rows)]) for k in range(n)]

    def timed(n: int, least_s: float, least_calls: int) -> float:
        inline.issue(queries(n))  # the first call of a shape is slower: not timed
        times: list[float] = []
        started = time.perf_counter()
        while len(times) < max(least_calls, 1) or time.perf_counter() - started < least_s:
            call = time.perf_counter()
            inline.issue(queries(n))
            times.append(time.perf_counter() - call)
        return statistics.median(times)

    batched: Server | None = None
    try:
        single = timed(1, seconds / 8, calls[0] - 1)
        full_size = len(rows[:inline.max_batch])
        full = single if full_size == 1 else timed(full_size, seconds / 8, calls[1] - 1)
        rate, counted, elapsed = full_size / full, 0, 0.0
        if scenario not in INLINE_SCENARIOS:
            # the workers ramp up (their first calls, the allocator, the clocks): what comes after counts
            batched = Server(stand_in, model, backend, samples, scenario="Offline", batching=batches,
                             workers=workers)
            # six rounds of two calls per worker must fit: else rounds of one call per worker, each timed whole
            if not inline.per_sample and 12 * full <= seconds:
                rate, counted, elapsed = _sustained(batched, stand_in, queries, 2 * workers * inline.max_batch,
                                                    seconds)
            else:
                rate, counted, elapsed = _rounds(batched, stand_in, queries, max(1, workers) * inline.max_batch,
                                                 0.75 * seconds)
        rate *= _cost_scale(model, rows)
    finally:
        if batched is not None:
            batched.close()
        samples.unload(rows)
    inline.raise_failure("warm-up")
    if batched is not None:
        batched.raise_failure("warm-up")
    return {"latency_ms": single * 1000, "batch_ms": full * 1000, "throughput_qps": rate,
            "seconds": round(elapsed, 3), "samples": counted}


def _sustained(batched: Server, stand_in: Rehearsal, queries: Any, round_size: int,
               seconds: float) -> tuple[float, int, float]:
    """Rounds of batches kept in flight for most of ``seconds``, the first ones (the ramp) not counted."""
    issued, rounds, started, base = 0, 0, time.perf_counter(), stand_in.answered
    middle: tuple[float, int] | None = None
    while rounds < 6 or time.perf_counter() - started < 0.75 * seconds:
        batched.issue(queries(round_size))
        issued, rounds = issued + round_size, rounds + 1
        if middle is None and rounds >= 3 and time.perf_counter() - started >= min(RAMP_S, 0.375 * seconds):
            middle = (time.perf_counter(), stand_in.answered)
    stand_in.wait_for(base + issued)
    assert middle is not None
    elapsed, counted = time.perf_counter() - middle[0], base + issued - middle[1]
    return counted / elapsed, counted, elapsed


def _rounds(batched: Server, stand_in: Rehearsal, queries: Any, round_size: int,
            seconds: float) -> tuple[float, int, float]:
    """Rounds of one call per worker at once, each waited for, until ``seconds`` have passed (at least
    two rounds; the first, the workers' first calls, not counted)."""
    rounds, counted, elapsed = 0, 0, 0.0
    started = time.perf_counter()
    while rounds < 2 or time.perf_counter() - started < seconds:
        base, began = stand_in.answered, time.perf_counter()
        batched.issue(queries(round_size))
        stand_in.wait_for(base + round_size)
        if rounds:
            counted, elapsed = counted + round_size, elapsed + time.perf_counter() - began
        rounds += 1
    return counted / elapsed, counted, elapsed


def _cost_scale(model: Any, rows: list[int]) -> float:
    """The dataset's samples against those the warm-up timed, by the model's cost per sample (1 without one)."""
    cost = getattr(model, "cost", None)
    if not callable(cost) or not rows:
        return 1.0
    timed = statistics.fmean(cost(i) for i in rows)
    every = statistics.fmean(cost(i) for i in range(model.count))
    return timed / every if every > 0 and timed > 0 else 1.0
