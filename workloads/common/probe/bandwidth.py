"""Copy bandwidth between the host and each GPU, both ways, and between GPUs, as NVIDIA's nvbandwidth
times it: the copy engines' memcpy (``copy_`` with ``non_blocking``) from and to page-locked host
memory on the GPU's own NUMA node (its sysfs ``local_cpulist``: a remote socket's memory would time
the inter-socket link), on every GPU; on two or more GPUs also each GPU's copies to every other one.

    spec: {"mb": 128}

Sanity: every copy holds its source's bytes exactly. Performance: GB/s, per GPU
(``h2d_GBps``/``d2h_GBps``, ``_gpu<i>`` on two or more GPUs) against a floor per PCIe generation and
width (the orchestrator's floors.yaml, read from the GPU's link as NVML gives it); ``d2d_min_GBps``:
the slowest of a GPU's copies to its peers (the detail names that peer).
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Iterator
from typing import Any

import torch

from workloads.common.probe.harness import Case, Context, median, per_gpu
from workloads.common.probe.memory import measure_transfer
from workloads.common.probe.protocol import Outcome, Performance, Sanity
from workloads.common.probe.sanity import identical

DECLARATION = {
    "name": "bandwidth",
    "kind": "microbenchmark",
    "needs": {"device": "cuda", "gpus": 1, "data": False},
    "sanity": "every copy, host to device, device to host and device to device, holds its source's bytes exactly",
    "units": {"h2d_GBps": "GB/s", "d2h_GBps": "GB/s", "d2d_min_GBps": "GB/s"},
    "sane": {"*_GBps": [0, 1e5]},
    "timeout_s": 600,
    "repeat": True,
    "device_bound": True,
    "remedy": {"wrong": "replace", "slow": "reseat"},
    "settings": {
        "mb": {"type": "int", "min": 1, "default": 128,
               "doc": "each copy (Azure's node health checks copy 128 MiB, nvbandwidth 512 MiB)"},
    },
}
CHECK = DECLARATION["name"]


def cases(spec: dict[str, Any], context: Context) -> Iterator[Case]:
    mb = int(spec["mb"])
    for gpu in context.device.placements(True):
        for metric, to_device in (("h2d_GBps", True), ("d2h_GBps", False)):
            yield Case(check=CHECK, metric=per_gpu(metric, gpu), gpu=gpu,
                       measure=functools.partial(measure_host, context, mb, to_device, gpu))
    if context.device.gpu_count > 1:
        for gpu in range(context.device.gpu_count):
            yield Case(check=CHECK, metric=per_gpu("d2d_min_GBps", gpu), gpu=gpu,
                       measure=functools.partial(measure_peers, context, mb, gpu))


@contextlib.contextmanager
def near(context: Context, gpu: int | None) -> Iterator[None]:
    """This thread on the GPU's NUMA node while the body runs (host memory is placed where it is first
    touched), as it was afterwards; nothing where the node is unknown."""
    cpus = context.device.local_cpus(gpu)
    before = os.sched_getaffinity(0)
    if not cpus or not cpus & before:
        yield
        return
    os.sched_setaffinity(0, cpus & before)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def measure_host(context: Context, mb: int, to_device: bool, gpu: int | None) -> Outcome:
    """Pinned host memory to GPU ``gpu`` (None: cuda:0), or back, from its own NUMA node."""
    return measure_transfer(context, mb, to_device, gpu, placed=near(context, gpu), named=True)


def measure_peers(context: Context, mb: int, gpu: int) -> Outcome:
    """GPU ``gpu``'s copies to each other GPU: the slowest of them, every copy verified."""
    source = torch.empty(mb << 20, dtype=torch.uint8, device=context.device.on(gpu))
    source.random_(0, 255)
    rates: dict[int, float] = {}
    wrong: list[int] = []
    for peer in range(context.device.gpu_count):
        if peer == gpu:
            continue
        target = torch.zeros(mb << 20, dtype=torch.uint8, device=context.device.on(peer))
        seconds, _ = median(context.time(lambda t=target: t.copy_(source, non_blocking=True), gpu))
        context.device.sync_on(peer)()
        rates[peer] = (mb << 20) / seconds / 1e9
        if not identical(target, source, "").passed:
            wrong.append(peer)
    slowest = min(rates, key=lambda peer: rates[peer])
    sanity = (Sanity(passed=False, detail=f"copies to GPU(s) {', '.join(map(str, wrong))} differ from their source")
              if wrong else Sanity(passed=True, detail=f"{len(rates)} peer copies of {mb} MiB verified byte for byte"))
    shown = ", ".join(f"cuda:{peer} {rate:.3g}" for peer, rate in sorted(rates.items()))
    return Outcome(sanity=sanity, performance=Performance(
        value=rates[slowest], unit="GB/s", detail=f"slowest peer cuda:{slowest} of cuda:{gpu}'s copies ({shown} GB/s)"))
