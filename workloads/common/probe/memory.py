"""Memory: host memory copy, device memory copy (on every GPU of two or more), and pinned copies
between host and device.

    spec: {"host_mb": 256, "device_mb": 1024, "copy_mb": 256}

Sanity: the copy holds its source's bytes exactly. Performance: GB/s (a copy in memory counts
its read and its write; a transfer its bytes once).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from typing import Any

import torch

from workloads.common.probe.harness import Case, Context, median, per_gpu
from workloads.common.probe.protocol import Outcome, Performance, Sanity
from workloads.common.probe.sanity import identical

DECLARATION = {
    "name": "memory",
    "kind": "microbenchmark",
    "needs": {"device": "any", "gpus": 0, "data": False},
    "sanity": "each copy holds its source's bytes exactly",
    "units": {"host_copy_GBps": "GB/s", "device_copy_GBps": "GB/s", "h2d_pinned_GBps": "GB/s",
              "d2h_pinned_GBps": "GB/s"},
    "sane": {"*_GBps": [0, 1e5]},
    "timeout_s": 300,
    "repeat": True,
    "device_bound": True,
    "remedy": {"wrong": "replace", "slow": "investigate"},
    "settings": {
        "host_mb": {"type": "int", "min": 1, "default": 256, "doc": "host memory copied"},
        "device_mb": {"type": "int", "min": 1, "default": 1024, "doc": "device memory copied, on each GPU"},
        "copy_mb": {"type": "int", "min": 1, "default": 256, "doc": "pinned host<->device copies"},
    },
}
CHECK = DECLARATION["name"]
NO_DEVICE = "no CUDA device: host memory is the device memory"


def cases(spec: dict[str, Any], context: Context) -> Iterator[Case]:
    yield Case(check=CHECK, metric="host_copy_GBps",
               measure=functools.partial(measure_host_copy, context, int(spec["host_mb"])))
    if not context.device.cuda:
        for metric in ("device_copy_GBps", "h2d_pinned_GBps", "d2h_pinned_GBps"):
            yield Case(check=CHECK, metric=metric, skip=NO_DEVICE)
        return
    device_mb = int(spec["device_mb"])
    for gpu in context.device.placements(True):
        yield Case(check=CHECK, metric=per_gpu("device_copy_GBps", gpu), gpu=gpu,
                   measure=functools.partial(measure_device_copy, context, device_mb, gpu))
    copy_mb = int(spec["copy_mb"])
    for metric, to_device in (("h2d_pinned_GBps", True), ("d2h_pinned_GBps", False)):
        yield Case(check=CHECK, metric=metric, measure=functools.partial(measure_transfer, context, copy_mb, to_device))


def measure_host_copy(context: Context, mb: int) -> Outcome:
    return copy_rate(context, torch.empty(mb << 20, dtype=torch.uint8), "host memory copy (read + write)")


def measure_device_copy(context: Context, mb: int, gpu: int | None) -> Outcome:
    """Device memory bandwidth of one GPU (None: cuda:0)."""
    device = context.device.on(gpu)
    what = "device memory copy (read + write)" + (f" on {device}" if gpu is not None else "")
    return copy_rate(context, torch.empty(mb << 20, dtype=torch.uint8, device=device), what, gpu)


def copy_rate(context: Context, source: torch.Tensor, what: str, gpu: int | None = None) -> Outcome:
    source.random_(0, 255)
    target = source.clone()
    target.zero_()
    times = context.time(lambda: target.copy_(source), gpu)
    seconds, words = median(times)
    return Outcome(sanity=copy_sanity(source, target),
                   performance=Performance(value=2 * source.numel() / seconds / 1e9, unit="GB/s",
                                           detail=f"{what}, {source.numel() >> 20} MiB, {words}"))


def measure_transfer(context: Context, mb: int, to_device: bool, gpu: int | None = None, *,
                     placed: contextlib.AbstractContextManager[object] | None = None, named: bool = False) -> Outcome:
    """Pinned host memory to GPU ``gpu`` (None: the main device), or back. ``placed``: what the buffers
    are made and the copies timed within (the CPUs near the GPU); ``named``: the sanity names the way."""
    with placed if placed is not None else contextlib.nullcontext():
        host = context.device.pinned(mb << 20)
        device = torch.empty(mb << 20, dtype=torch.uint8, device=context.device.on(gpu))
        source, target = (host, device) if to_device else (device, host)
        source.random_(0, 255)
        target.zero_()
        times = context.time(lambda: target.copy_(source, non_blocking=True), gpu)
    seconds, words = median(times)
    way = "host to device" if to_device else "device to host"
    where = f" {context.device.on(gpu)}" if gpu is not None else ""
    what = f"copy of {mb} MiB"
    return Outcome(sanity=identical(target, source, f"{way} {what}" if named else what),
                   performance=Performance(value=(mb << 20) / seconds / 1e9, unit="GB/s",
                                           detail=f"pinned {way}{where}, {mb} MiB, {words}"))


def copy_sanity(source: torch.Tensor, target: torch.Tensor) -> Sanity:
    """``target`` holds ``source``'s bytes (after the timed copies: the last one is checked)."""
    return identical(target, source, f"copy of {source.numel() >> 20} MiB")
