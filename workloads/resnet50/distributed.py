"""Data parallelism through ``torchrun``: one process per device, gradients all-reduced by DDP.

``torchrun`` sets RANK, WORLD_SIZE and LOCAL_RANK; without them the run is a single process and
nothing here touches ``torch.distributed``. CPU processes talk over gloo, GPUs over NCCL. Tensors
handed to a collective live on ``Context.device`` (NCCL has no CPU tensors).

BatchNorm statistics are per rank, as in the MLPerf reference (each replica normalises its own
batch and keeps its own running statistics): DDP does not broadcast the buffers before every
forward (its default), which would be a collective per step for statistics training never reads;
``engine.sync_buffers`` gives every rank rank 0's before each evaluation instead.
"""

from __future__ import annotations

import contextlib
import inspect
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

import torch
import torch.distributed as dist
from torch import nn


@dataclass(frozen=True)
class Context:
    """Where this process sits in the job."""

    rank: int = 0
    """Global rank; rank 0 logs and writes results."""
    world_size: int = 1
    """Number of processes."""
    local_rank: int = 0
    """Rank on this node (selects the GPU)."""
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    """Device of this process."""
    backend: str | None = None
    """'nccl', 'gloo', or None for a single process."""

    def __post_init__(self) -> None:
        if not 0 <= self.rank < self.world_size:
            raise ValueError(f"rank {self.rank} outside world of {self.world_size}")

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def is_distributed(self) -> bool:
        return self.world_size > 1


def init(device_type: str, environ: Mapping[str, str] | None = None) -> Context:
    """Join the process group torchrun describes (if any) on ``device_type`` ('cpu' or 'cuda').

    On CUDA the process's GPU is selected before the group exists, so that NCCL and every later
    allocation land on GPU ``LOCAL_RANK`` rather than all on GPU 0.
    """
    env = os.environ if environ is None else environ
    world = int(env.get("WORLD_SIZE", "1"))
    rank = int(env.get("RANK", "0"))
    local_rank = int(env.get("LOCAL_RANK", "0"))
    if device_type == "cuda":
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device(device_type)
    if world <= 1:
        return Context(device=device)
    backend = "nccl" if device.type == "cuda" else "gloo"
    if not dist.is_initialized():
        dist.init_process_group(backend, rank=rank, world_size=world)
    return Context(rank=rank, world_size=world, local_rank=local_rank, device=device, backend=backend)


def no_buffer_broadcast() -> dict[str, bool]:
    """DDP's keyword for "no buffer broadcast before each forward": ``forward_sync_buffers=False``
    where it exists (torch 2.13 on: buffers still start equal, synced once at construction), else
    ``broadcast_buffers=False`` (every rank builds the model from the same seed, so they start equal)."""
    if "forward_sync_buffers" in inspect.signature(nn.parallel.DistributedDataParallel.__init__).parameters:
        return {"forward_sync_buffers": False}
    return {"broadcast_buffers": False}


def wrap(model: nn.Module, ctx: Context) -> nn.Module:
    """DistributedDataParallel when there is more than one process, else the model itself; BatchNorm
    statistics stay per rank (no broadcast per forward)."""
    if not ctx.is_distributed:
        return model
    ids = [ctx.device.index] if ctx.device.type == "cuda" else None
    return nn.parallel.DistributedDataParallel(model, device_ids=ids, gradient_as_bucket_view=True,
                                               **no_buffer_broadcast())


def all_reduce_sum(tensor: torch.Tensor, ctx: Context) -> torch.Tensor:
    """Sum of ``tensor`` (on ``ctx.device``) over all processes; the argument is left unchanged."""
    if not ctx.is_distributed:
        return tensor
    total = tensor.clone()
    dist.all_reduce(total, op=dist.ReduceOp.SUM)
    return total


def broadcast_int(value: int, ctx: Context) -> int:
    """Rank 0's ``value`` on every rank."""
    if not ctx.is_distributed:
        return value
    holder = torch.tensor([value], dtype=torch.int64, device=ctx.device)
    dist.broadcast(holder, src=0)
    return int(holder.item())


def barrier(ctx: Context) -> None:
    if ctx.is_distributed:
        dist.barrier()


def shutdown(ctx: Context) -> None:
    """Leave the group (entry points leave through `joined`, which meets the other ranks first)."""
    if ctx.is_distributed and dist.is_initialized():
        dist.destroy_process_group()


@contextlib.contextmanager
def joined(device_type: str) -> Iterator[Context]:
    """`init` for the block, then leave: after a block that ended well, only once every rank has
    ended (a rank that tears down while its peer still talks makes gloo abort the peer); after an
    error, at once (the peer may never come; torchrun stops it)."""
    ctx = init(device_type)
    try:
        yield ctx
        barrier(ctx)
    finally:
        shutdown(ctx)
