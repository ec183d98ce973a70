"""All-reduce between two nodes (a fleet's check: the orchestrator starts the probe on both nodes of
each pair at once, told ``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT``), timed as
nccl-tests' all_reduce_perf times it: one rank per node, on its first GPU with NCCL, on its CPU with
gloo where it has no GPU; a fixed count of all-reduces after a fixed warm-up, the same on both ranks.

    spec: {"mb": 256, "iterations": 20, "warmup": 5}

Sanity: rank r contributes r + 1 everywhere, so every element comes back as 1 + 2 + ... + n on each
rank. Performance: bus bandwidth in GB/s (algorithm bandwidth x 2 (n - 1) / n; for two ranks the two
are equal), rank 0's.
"""

from __future__ import annotations

import datetime
import functools
import os
import time
from collections.abc import Iterator
from typing import Any

import torch

from workloads.common.probe.harness import Case, Context
from workloads.common.probe.protocol import Outcome, Performance, Sanity

DECLARATION = {
    "name": "nccl_pairs",
    "kind": "fabric",
    "runs": "fleet",
    "needs": {"device": "any", "gpus": 0, "data": False, "nodes": 2},
    "sanity": "each rank contributes its rank + 1: every element of both nodes' buffers comes back as 1 + 2",
    "units": {"allreduce_pair_busbw_GBps": "GB/s"},
    "sane": {"allreduce_pair_busbw_GBps*": [0, 1e5]},
    "timeout_s": 600,
    "repeat": False,
    "device_bound": True,
    "remedy": {"wrong": "check_fabric", "slow": "check_fabric"},
    "settings": {
        "mb": {"type": "int", "min": 1, "default": 256, "doc": "the all-reduced buffer"},
        "iterations": {"type": "int", "min": 1, "default": 20, "doc": "all-reduces timed (nccl-tests' -n)"},
        "warmup": {"type": "int", "min": 0, "default": 5, "doc": "all-reduces before them (nccl-tests' -w)"},
        "slow_pct": {"type": "float", "min": 0, "default": 20.0,
                     "doc": "a pair this much below the median of the fleet's pairs is slow"},
    },
}
CHECK = DECLARATION["name"]
METRIC = "allreduce_pair_busbw_GBps"
RENDEZVOUS_S = 300
"""How long a rank waits for the other to join (its node job may start later)."""


def cases(spec: dict[str, Any], context: Context) -> Iterator[Case]:
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        yield Case(check=CHECK, metric=METRIC, skip="runs between two nodes: the fleet starts it with RANK and"
                                                    " WORLD_SIZE set (mltrain qualify --runner slurm)")
        return
    yield Case(check=CHECK, metric=METRIC, measure=functools.partial(
        measure, context, int(spec["mb"]), int(spec["iterations"]), int(spec["warmup"])))


def measure(context: Context, mb: int, iterations: int, warmup: int) -> Outcome:
    import torch.distributed as dist

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    backend = "nccl" if context.device.cuda else "gloo"
    device = context.device.main
    sync = context.device.sync_on(None)
    dist.init_process_group(backend, init_method="env://", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=RENDEZVOUS_S))
    try:
        elements = (mb << 20) // 4
        buffer = torch.full((elements,), float(rank + 1), device=device)  # (E,) fp32
        dist.all_reduce(buffer)
        sync()
        sanity = sum_sanity(buffer, world)
        buffer.zero_()  # sums of zeros from here on: timed values that never overflow
        for _ in range(warmup):
            dist.all_reduce(buffer)
        sync()
        dist.barrier()
        started = time.perf_counter()
        for _ in range(iterations):
            dist.all_reduce(buffer)
        sync()
        seconds = (time.perf_counter() - started) / iterations
    finally:
        dist.destroy_process_group()
    algbw = elements * 4 / seconds / 1e9
    return Outcome(sanity=sanity, performance=Performance(
        value=algbw * 2 * (world - 1) / world, unit="GB/s",
        detail=f"{backend}, {world} ranks, {elements * 4 >> 20} MiB fp32, mean of {iterations} all-reduces after"
               f" {warmup}, bus bandwidth as nccl-tests defines it; rank {rank} on {device}"))


def sum_sanity(buffer: torch.Tensor, world: int) -> Sanity:
    """Every element is 1 + 2 + ... + world (rank r contributed r + 1)."""
    expected = world * (world + 1) / 2
    wrong = int((buffer != expected).sum().item())
    if wrong:
        return Sanity(passed=False, detail=f"all-reduce sum is not {expected:g} in {wrong} of {buffer.numel()}"
                                           " elements")
    return Sanity(passed=True, detail=f"all-reduce sum of {world} ranks is {expected:g} in every element")
