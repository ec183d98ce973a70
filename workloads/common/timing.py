"""The one timing kit of workloads and benchmarks: the device synchronised around a timed region only,
warm-up calls outside it, and repeated regions (whose median a benchmark reports).

    seconds, per_step_ms = timed_steps(step, steps, device)        # a throughput mode's steps
    regions, warm_s = timed_regions(step, calls=10, repeats=3, warmup=3, device=device, sampler=sampler)

A ``sampler`` is any context manager entered around each timed region (``nvml.GpuSampler`` reads the
GPU's clocks and power there); none by default.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any

import torch


def synchronize(device: torch.device) -> None:
    """Wait for ``device``'s queued work (nothing to wait for on a CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed_steps(step: Callable[[], object], steps: int, device: torch.device) -> tuple[float, list[float]]:
    """(seconds for ``steps`` calls of ``step``, each call's milliseconds). On CUDA the host waits
    for the device only before and after the timed region; CUDA events time each step."""
    if device.type == "cuda":
        marks = [torch.cuda.Event(enable_timing=True) for _ in range(steps + 1)]
        synchronize(device)
        started = time.perf_counter()
        marks[0].record()
        for index in range(steps):
            step()
            marks[index + 1].record()
        synchronize(device)
        return time.perf_counter() - started, [marks[i].elapsed_time(marks[i + 1]) for i in range(steps)]
    per_step = []
    started = time.perf_counter()
    for _ in range(steps):
        begun = time.perf_counter()
        step()
        per_step.append((time.perf_counter() - begun) * 1000)
    return time.perf_counter() - started, per_step


def warm_up(fn: Callable[[], object], calls: int, device: torch.device) -> float:
    """Seconds of ``calls`` untimed calls (the device's queue drained at the end)."""
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    synchronize(device)
    return time.perf_counter() - start


def timed_region(fn: Callable[[], object], calls: int, device: torch.device,
                 sampler: contextlib.AbstractContextManager[Any] | None = None) -> float:
    """Seconds of ``calls`` calls, the device synchronised around them (inside ``sampler``)."""
    with sampler if sampler is not None else contextlib.nullcontext():
        synchronize(device)
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        synchronize(device)
        return time.perf_counter() - start


def timed_regions(fn: Callable[[], object], *, calls: int, repeats: int, warmup: int, device: torch.device,
                  sampler: Any = None) -> tuple[list[float], float]:
    """(seconds per timed region of ``calls`` calls, for each of ``repeats``; seconds of the ``warmup``
    calls). A ``sampler`` with a ``reset`` is reset after the warm-up, so it holds the regions' samples."""
    warm = warm_up(fn, warmup, device)
    if sampler is not None:
        sampler.reset()
    return [timed_region(fn, calls, device, sampler) for _ in range(repeats)], warm
