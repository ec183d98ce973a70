"""NCCL: an all-reduce (sum, fp32) across every GPU this process sees, as nccl-tests times it.

    spec: {"mb": 256}

Sanity: GPU i contributes i + 1 everywhere, so every element of every GPU's buffer must come back
as 1 + 2 + ... + n. Performance: bus bandwidth in GB/s (algorithm bandwidth x 2 (n - 1) / n).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

import torch

from workloads.common.probe.harness import Case, Context, median, timed
from workloads.common.probe.protocol import Outcome, Performance, Sanity

DECLARATION = {
    "name": "nccl",
    "kind": "microbenchmark",
    "needs": {"device": "cuda", "gpus": 2, "data": False},
    "sanity": "GPU i contributes i + 1 everywhere: every element of every GPU's buffer comes back as 1 + 2 + ... + n",
    "units": {"allreduce_busbw_GBps": "GB/s"},
    "sane": {"allreduce_busbw_GBps": [0, 1e5]},
    "timeout_s": 300,
    "repeat": True,
    "device_bound": True,
    "remedy": {"wrong": "replace", "slow": "drain_reboot"},
    "settings": {
        "mb": {"type": "int", "min": 1, "default": 256, "doc": "the all-reduced buffer, per GPU"},
    },
}
CHECK = DECLARATION["name"]
METRIC = "allreduce_busbw_GBps"


def cases(spec: dict[str, Any], context: Context) -> Iterator[Case]:
    yield Case(check=CHECK, metric=METRIC, measure=functools.partial(measure, context, int(spec["mb"])))


def measure(context: Context, mb: int) -> Outcome:
    import torch.cuda.nccl as nccl

    count = context.device.gpu_count
    elements = (mb << 20) // 4
    tensors = [torch.full((elements,), float(i + 1), device=f"cuda:{i}") for i in range(count)]

    def sync_all() -> None:
        for i in range(count):
            torch.cuda.synchronize(i)

    nccl.all_reduce(tensors)
    sync_all()
    sanity = all_reduce_sanity(tensors)
    for tensor in tensors:  # sums of zeros from here on: timed values that never overflow
        tensor.zero_()
    times = timed(lambda: nccl.all_reduce(tensors), sync_all, context.seconds, context.max_repeats)
    seconds, words = median(times)
    algbw = elements * 4 / seconds / 1e9
    return Outcome(sanity=sanity, performance=Performance(
        value=algbw * 2 * (count - 1) / count, unit="GB/s",
        detail=f"{count} GPUs, {elements * 4 >> 20} MiB fp32, bus bandwidth as nccl-tests defines it; {words}"))


def all_reduce_sanity(tensors: list[torch.Tensor]) -> Sanity:
    """Each of the n buffers holds 1 + 2 + ... + n in every element (buffer i contributed i + 1)."""
    count = len(tensors)
    expected = count * (count + 1) / 2
    wrong = [(i, t, int((t != expected).sum().item())) for i, t in enumerate(tensors)]
    wrong = [(i, t, n) for i, t, n in wrong if n]
    if wrong:
        where = ", ".join(f"buffer {i} on {t.device}: {n} of {t.numel()} elements" for i, t, n in wrong)
        return Sanity(passed=False, detail=f"all-reduce sum is not {expected:g} everywhere ({where})")
    return Sanity(passed=True, detail=f"all-reduce sum of {count} buffers is {expected:g} in every element")
