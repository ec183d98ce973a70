"""LoadGen's system under test and query sample library over one model and one backend.

The QSL loads preprocessed samples into one contiguous array when LoadGen asks (outside the timed
run, as the rules allow) and drops them when it says so. The SUT answers each query with the
model's response bytes: SingleStream and MultiStream queries run in LoadGen's issuing thread (one
query is in flight at a time, so a hand-off would only add latency); Offline and Server queries go
to worker threads, up to ``max_batch`` samples per backend call. Offline's one query is cut into
batches in LoadGen's issuing thread, which gathers each batch's samples while the workers predict
(a bounded queue keeps it a few batches ahead, as the reference's ``QueueRunner`` does); Server's
queries are merged by the workers with whatever else waits (dynamic batching), then gathered.

A backend that fails during a test (a device lost, out of memory) must not leave LoadGen waiting
for answers that never come: the batch is answered empty, as the reference does, the first error
kept, and the harness fails the test with it once LoadGen returns. Any other error raised in one of
LoadGen's callbacks (a sample that cannot be read while LoadGen loads it) cannot be carried back
through LoadGen's C++ frames (the process would die of SIGSEGV): `from_loadgen` ends the process
there, in order, with the error's line and its exit code (2 for bad input).
"""

from __future__ import annotations

import functools
import os
import queue
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from workloads.common.cli import one_line
from workloads.common.errors import EXIT_FAILURE, Failure, WorkloadError
from workloads.inference.backends import Backend

INLINE_SCENARIOS = ("SingleStream", "MultiStream")


def from_loadgen(callback: Callable[..., None], *, prefix: str = "inference") -> Callable[..., None]:
    """``callback`` as LoadGen may call it: an error it raises ends the process at once with one line
    (``prefix: message``) and the error's exit code (a WorkloadError's: 2 for bad input; else 1),
    instead of unwinding into LoadGen, which cannot take it."""

    @functools.wraps(callback)
    def called(*args: Any) -> None:
        try:
            callback(*args)
        except BaseException as exc:  # noqa: BLE001 - nothing may reach LoadGen's frames
            if isinstance(exc, WorkloadError):
                code, said = exc.exit_code, one_line(exc)
            else:
                code, said = EXIT_FAILURE, f"{type(exc).__name__} in LoadGen's {callback.__name__} callback: " \
                                         f"{one_line(exc)}"
            try:
                sys.stdout.flush()
                sys.stderr.write(f"{prefix}: {said}\n")
                sys.stderr.flush()
            finally:
                os._exit(code)

    return called


@dataclass
class Timings:
    """Where the time of one test went, summed over its batches (seconds)."""

    predict_s: float = 0.0
    respond_s: float = 0.0
    batches: int = 0
    samples: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"predict_s": self.predict_s, "respond_s": self.respond_s, "batches": self.batches,
                "samples": self.samples}


class Samples:
    """The QSL's memory: preprocessed samples, each made once per process, the loaded set contiguous."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.made: dict[int, np.ndarray] = {}
        self.rows: dict[int, int] = {}
        self.array = np.empty((0,), dtype=np.float32)
        self.preprocess_s = 0.0

    def load(self, indices: Sequence[int]) -> None:
        started = time.perf_counter()
        wanted = list(dict.fromkeys(indices))
        for index in wanted:
            if index not in self.made:
                self.made[index] = self.model.load(index)
        self.array = np.stack([self.made[i] for i in wanted]) if wanted else np.empty((0,), dtype=np.float32)
        self.rows = {index: row for row, index in enumerate(wanted)}
        self.preprocess_s += time.perf_counter() - started

    def unload(self, indices: Sequence[int]) -> None:
        self.rows = {}
        self.array = np.empty((0,), dtype=np.float32)

    def batch(self, indices: Sequence[int]) -> np.ndarray:
        if len(indices) == 1:
            row = self.rows[indices[0]]
            return self.array[row:row + 1]
        return np.take(self.array, [self.rows[i] for i in indices], axis=0)


class Server:
    """Turns LoadGen's queries into backend calls and responses."""

    def __init__(self, lg: Any, model: Any, backend: Backend, samples: Samples, *, scenario: str, max_batch: int,
                 workers: int) -> None:
        self.lg, self.model, self.backend, self.samples = lg, model, backend, samples
        self.inline = scenario in INLINE_SCENARIOS
        self.gather_ahead = scenario == "Offline"
        self.max_batch = max_batch
        self.timings = Timings()
        self.failure: str | None = None
        """The first backend error of the test (its type and message), if any."""
        self.lock = threading.Lock()
        self.queue: queue.Queue[tuple[list[Any], np.ndarray | None] | None] = queue.Queue(
            maxsize=2 * workers if self.gather_ahead else 0)
        self.threads = [] if self.inline else [threading.Thread(target=self._work, name=f"sut-{n}", daemon=True)
                                               for n in range(workers)]
        for thread in self.threads:
            thread.start()

    def reset(self) -> Timings:
        """The timings so far, and a fresh count for the next test."""
        with self.lock:
            done, self.timings = self.timings, Timings()
        return done

    def raise_failure(self, test: str) -> None:
        """Failure (exit 1, one line) when the backend failed during ``test``."""
        if self.failure is not None:
            raise Failure(f"the backend failed during the {test} test: {self.failure}")

    def issue(self, queries: Sequence[Any]) -> None:
        if self.inline:
            self._answer(list(queries))
            return
        for start in range(0, len(queries), self.max_batch):
            chunk = list(queries[start:start + self.max_batch])
            gathered = self.samples.batch([q.index for q in chunk]) if self.gather_ahead else None
            self.queue.put((chunk, gathered))

    def flush(self) -> None:
        pass

    def _work(self) -> None:
        while True:
            item = self.queue.get()
            if item is None:
                return
            queries, gathered = item
            if gathered is not None:
                self._answer(queries, gathered)
                continue
            while len(queries) < self.max_batch:  # what else waits joins this batch (Server's dynamic batching)
                try:
                    more = self.queue.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    self.queue.put(None)
                    break
                queries = queries + more[0]
            for start in range(0, len(queries), self.max_batch):
                self._answer(queries[start:start + self.max_batch])

    def _answer(self, queries: list[Any], gathered: np.ndarray | None = None) -> None:
        indices = [q.index for q in queries]
        started = time.perf_counter()
        try:
            outputs = self.backend.predict(self.samples.batch(indices) if gathered is None else gathered)
            predicted = time.perf_counter()
            payloads = self.model.respond(outputs, indices)
        except Exception as exc:  # noqa: BLE001 - any backend error: LoadGen still needs its answers
            with self.lock:
                self.failure = self.failure or f"{type(exc).__name__}: {one_line(exc)[:300]}"
            self.lg.QuerySamplesComplete([self.lg.QuerySampleResponse(q.id, 0, 0) for q in queries])
            return
        responses = [self.lg.QuerySampleResponse(q.id, p.ctypes.data, p.nbytes) for q, p in zip(queries, payloads,
                                                                                                  strict=True)]
        self.lg.QuerySamplesComplete(responses)
        ended = time.perf_counter()
        with self.lock:
            self.timings.predict_s += predicted - started
            self.timings.respond_s += ended - predicted
            self.timings.batches += 1
            self.timings.samples += len(indices)

    def close(self) -> None:
        for _ in self.threads:
            self.queue.put(None)
        for thread in self.threads:
            thread.join()
