"""What every check shares: the timing of calls (batches between synchronisations), the case a
check plans, and running it to one protocol line whatever happens (an error, out of memory).

A check module (`registry`) plans its cases with `cases(spec, context)` (`plan`: unless the device
lacks what its declaration needs); each `Case` is measured by `run_case`, which prints its result
(sanity and performance), its skip or its error.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

from workloads.common.probe import protocol, registry
from workloads.common.probe.device import Device
from workloads.common.probe.protocol import Outcome, one_line

BATCH_S = 0.002
"""Calls are timed in batches of at least this long between synchronisations, so that a kernel of
microseconds on a GPU is not measured as its launch and sync latency."""


def timed(run: Callable[[], object], sync: Callable[[], None], seconds: float, max_repeats: int,
          warmup: int = 1) -> list[float]:
    """Seconds per call of ``run`` (after ``warmup`` calls), one entry per batch, batches repeated
    until ``seconds`` have passed (at least 3)."""
    for _ in range(warmup):
        run()
    sync()
    t0 = time.perf_counter()
    run()
    sync()
    batch = max(1, min(1000, int(BATCH_S / max(time.perf_counter() - t0, 1e-9)) + 1))
    times: list[float] = []
    started = time.perf_counter()
    while len(times) < max_repeats and (len(times) < 3 or time.perf_counter() - started < seconds):
        t0 = time.perf_counter()
        for _ in range(batch):
            run()
        sync()
        times.append((time.perf_counter() - t0) / batch)
    return times


def median(times: list[float]) -> tuple[float, str]:
    """(median seconds per call, its words for a performance detail)."""
    middle = statistics.median(times)
    return middle, f"median of {len(times)} calls {middle * 1e3:.3g} ms"


@dataclass(frozen=True, kw_only=True)
class Context:
    """What a check plans and measures with: the device, how long a case is timed, the seed."""

    device: Device
    seconds: float = 0.5
    """Each case is repeated for about this long (at least 3 batches)."""
    max_repeats: int = 200
    seed: int = 0
    data: bool = False
    """The dataset's folder was given (``DATADIR``)."""

    def time(self, run: Callable[[], object], gpu: int | None = None) -> list[float]:
        """`timed` on the case's device."""
        return timed(run, self.device.sync_on(gpu), self.seconds, self.max_repeats)


@dataclass(frozen=True, kw_only=True)
class Case:
    """One measurement a check plans: its metric, and either how to measure it or why this device
    cannot (``skip``)."""

    check: str
    metric: str
    measure: Callable[[], Outcome] | None = None
    skip: str = ""
    gpu: int | None = None
    """CUDA's index of a per-GPU case (its metric ends in ``_gpu<i>``); None for the main device."""


def plan(check: registry.Check, spec: dict[str, Any], context: Context) -> Iterator[Case]:
    """The cases of ``check`` (its settings ``spec``, defaults filled in) on this device: one skip
    naming what is missing where the device lacks what the check's declaration needs."""
    declaration = check.DECLARATION
    why = registry.unmet(declaration, cuda=context.device.cuda, gpus=context.device.gpu_count, data=context.data)
    if why:
        yield Case(check=declaration["name"], metric=declaration["name"], skip=why)
        return
    yield from check.cases(spec, context)


def per_gpu(metric: str, gpu: int | None) -> str:
    """A per-GPU case's metric: ``<metric>_gpu<i>``; the plain metric on the main device."""
    return metric if gpu is None else f"{metric}_gpu{gpu}"


def run_case(case: Case, device: Device) -> None:
    """Measure one case and print what came of it: its result, its skip, or its error (an error
    frees the device's cached memory for the next case)."""
    if case.measure is None:
        protocol.skip(case.check, case.metric, case.skip)
        return
    try:
        outcome = case.measure()
    except out_of_memory_error() as exc:  # printed as PyTorch words it, for the orchestrator's classifier
        sys.stderr.write(f"torch.OutOfMemoryError: {exc}\n")
        protocol.error(case.check, case.metric, f"torch.OutOfMemoryError: {one_line(exc)}", case.gpu)
        device.free()
    except (RuntimeError, ValueError, OSError, MemoryError) as exc:  # MemoryError: Python's own allocation
        protocol.error(case.check, case.metric, f"{type(exc).__name__}: {one_line(exc)}", case.gpu)
        device.free()
    else:
        protocol.result(case.check, case.metric, outcome, case.gpu)


def out_of_memory_error() -> type[BaseException]:
    """The class PyTorch raises when a device runs out of memory: ``torch.OutOfMemoryError`` from
    torch 2.4, ``torch.cuda.OutOfMemoryError`` before (NGC 24.04 ships torch 2.3)."""
    found = getattr(torch, "OutOfMemoryError", None) or getattr(torch.cuda, "OutOfMemoryError", None)
    return found if isinstance(found, type) else RuntimeError
