"""Run independent per-case jobs in worker processes, yielding results as they finish."""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from typing import Any, TypeVar

Result = TypeVar("Result")


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
