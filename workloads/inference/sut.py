"""LoadGen's system under test and query sample library over one model and one backend.

The QSL holds exactly the samples LoadGen names: ``LoadSamplesToRam`` preprocesses each (outside the
timed run, as the rules allow) and ``UnloadSamplesFromRam`` drops them, so memory follows the
performance set, not the dataset (the reference's QSLs do the same). The SUT answers each query with
the model's response bytes: SingleStream and MultiStream queries run in LoadGen's issuing thread (one
query is in flight at a time, so a hand-off would only add latency), and so do Offline's volumes of a
per-sample model given one worker (the reference's SUT answers them so); other Offline and Server
queries go to worker threads. Offline's one query is cut into batches in LoadGen's issuing thread, which gathers
each batch's samples while the workers predict (a bounded queue keeps it a few batches ahead, as the
reference's ``QueueRunner`` does); Server's queries are merged by the workers with whatever else
waits (dynamic batching), then gathered.

Every backend call respects the model's batch axis (`Batching`): up to ``max_batch`` samples per call
in every scenario (MultiStream's 8 samples make 8 calls to a batch-1 model, as the reference's do),
and exactly the batch of a model whose batch axis is fixed (a short batch is filled with its last
sample, whose extra outputs are dropped). A per-sample model (``Model.infer``: 3D-UNet's sliding
window over one whole volume) takes its samples one by one and calls the backend itself, with up to
``max_batch`` windows per call.

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


@dataclass(frozen=True, kw_only=True)
class Batching:
    """How samples meet the backend: at most ``max_batch`` per call; exactly ``fixed`` when the model's
    batch axis is fixed (a short batch is filled up)."""

    max_batch: int
    fixed: int | None = None

    def predict(self, backend: Backend, batch: np.ndarray) -> Sequence[np.ndarray]:
        """The backend's outputs for ``batch`` (N <= max_batch), one row per sample."""
        count = len(batch)
        if self.fixed is None or count == self.fixed:
            return backend.predict(batch)
        filler = np.repeat(batch[-1:], self.fixed - count, axis=0)
        return [np.asarray(output)[:count] for output in backend.predict(np.concatenate([batch, filler]))]


def answers_per_sample(model: Any) -> bool:
    """The model answers one sample at a time and calls the backend itself (``Model.infer``: 3D-UNet's
    sliding window over a whole volume), where others answer a batch of samples in one backend call."""
    return callable(getattr(model, "infer", None))


def batch_axis(input_shape: Sequence[Any]) -> int | None:
    """The model's fixed batch size (its input's first axis is a number), None when the axis is free."""
    first = input_shape[0] if input_shape else None
    return first if isinstance(first, int) and first > 0 else None


class Samples:
    """The QSL's memory: the preprocessed samples LoadGen asked to load, and nothing else."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.loaded: dict[int, np.ndarray] = {}
        self.lock = threading.Lock()
        self.preprocess_s = 0.0
        self.loads = 0
        """Samples preprocessed so far (a sample LoadGen loads twice counts twice)."""

    def load(self, indices: Sequence[int]) -> None:
        started = time.perf_counter()
        for index in indices:
            if index not in self.loaded:
                array = self.model.load(index)
                with self.lock:
                    self.loaded[index] = array
                    self.loads += 1
        self.preprocess_s += time.perf_counter() - started

    def unload(self, indices: Sequence[int]) -> None:
        with self.lock:
            for index in indices:
                self.loaded.pop(index, None)

    def get(self, index: int) -> np.ndarray:
        return self.loaded[index]

    def batch(self, indices: Sequence[int]) -> np.ndarray:
        """The samples stacked (N, ...): a view of the one sample when N is 1."""
        if len(indices) == 1:
            return self.loaded[indices[0]][None]
        return np.stack([self.loaded[i] for i in indices])


class Server:
    """Turns LoadGen's queries into backend calls and responses."""

    def __init__(self, lg: Any, model: Any, backend: Backend, samples: Samples, *, scenario: str,
                 batching: Batching, workers: int) -> None:
        self.lg, self.model, self.backend, self.samples = lg, model, backend, samples
        self.batching = batching
        self.per_sample = answers_per_sample(model)
        self.inline = scenario in INLINE_SCENARIOS or (self.per_sample and workers == 1 and scenario == "Offline")
        """Answered in LoadGen's issuing thread: one query in flight (SingleStream, MultiStream), or Offline's
        volumes one after the other where one worker would take them (as the reference's SUT answers them: a
        worker thread held 1.39x the reference's peak where this held 1.17-1.19x, quarter-width model, windows in
        torch; 0.91x with them in NumPy)."""
        self.gather_ahead = scenario == "Offline" and not self.per_sample
        self.max_batch = 1 if self.per_sample else batching.max_batch
        """Samples per work item (one backend call, or one volume of a per-sample model)."""
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
        if self.inline:  # MultiStream's samples in calls of the model's batch, one after the other
            for start in range(0, len(queries), self.max_batch):
                self._answer(list(queries[start:start + self.max_batch]))
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
            payloads, predicted = self._payloads(indices, gathered)
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

    def compute(self, indices: Sequence[int]) -> list[np.ndarray]:
        """The payloads of ``indices`` (loaded), outside any test: the warm-up's path through the model."""
        return self._payloads(indices, None)[0]

    def _payloads(self, indices: Sequence[int], gathered: np.ndarray | None) -> tuple[list[np.ndarray], float]:
        """The response of each sample, and when the backend was done with them (perf_counter)."""
        if self.per_sample:
            payloads = [self.model.infer(self.backend, self.samples.get(i), self.batching) for i in indices]
            return payloads, time.perf_counter()
        outputs = self.batching.predict(self.backend, self.samples.batch(indices) if gathered is None else gathered)
        predicted = time.perf_counter()
        return self.model.respond(outputs, indices), predicted

    def close(self) -> None:
        for _ in self.threads:
            self.queue.put(None)
        for thread in self.threads:
            thread.join()
