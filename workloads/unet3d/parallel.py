"""Run independent per-case jobs in worker processes, yielding results as they finish."""

from __future__ import annotations

import contextlib
import multiprocessing
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from pathlib import Path
from typing import Any, TypeVar

Result = TypeVar("Result")

BYTES_PER_WORKER = 64 << 20
"""Raw bytes (compressed NIfTI) a worker process is started for. A worker first imports numpy, scipy
and torch, about 4 CPU seconds, as long as preprocessing some 40 MB of raw cases takes (a 20 MB case
of 160x256x256 voxels: 2 s); a real KiTS19 case is some 100 MB (29 GB, 300 cases). Raw cases smaller
than this all together (a synthetic or smoke set) are read and made in this process."""


def workers_for(files: Iterable[Path], workers: int) -> int:
    """The worker processes worth starting for ``files``: at most ``workers``, one per BYTES_PER_WORKER
    (a file that cannot be read counts nothing: its check says why)."""
    total = 0
    for path in files:
        with contextlib.suppress(OSError):
            total += path.stat().st_size
    return worth_starting(total, BYTES_PER_WORKER, workers)


def worth_starting(work: int, work_per_worker: int, workers: int) -> int:
    """The one rule for how many worker processes a job is worth: at most ``workers``, one per
    ``work_per_worker`` of ``work`` (bytes to read, voxels to make), and always at least one (this
    process: starting a worker costs its imports, some 4 CPU seconds)."""
    return max(1, min(workers, work // work_per_worker))


def map_unordered(
    function: Callable[..., Result], jobs: Sequence[tuple[Any, ...]], workers: int
) -> Iterator[Result]:
    """``function(*job)`` for every job, ``workers`` at a time, in completion order.

    One worker (or one job) runs in this process. The first job that raises stops the rest
    (pending jobs are cancelled) and its exception propagates unchanged. Workers are started
    with ``spawn`` so no thread pool state (OpenMP, torch) is inherited through ``fork``.
    """
    if workers <= 1 or len(jobs) <= 1:
        for job in jobs:
            yield function(*job)
        return
    context = multiprocessing.get_context("spawn")
    executor = ProcessPoolExecutor(max_workers=min(workers, len(jobs)), mp_context=context)
    try:
        pending = {executor.submit(function, *job) for job in jobs}
        while pending:
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in finished:
                yield future.result()
    finally:
        executor.shutdown(wait=True, cancel_futures=True)
