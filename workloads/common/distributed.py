"""Data parallelism on one node through ``torchrun``: one process per device, gradients all-reduced by DDP.

``torchrun`` sets RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE; without them the run is a
single process and nothing here touches ``torch.distributed``. CPU processes talk over gloo, GPUs
over NCCL. Every tensor handed to a collective lives on ``Context.device`` (NCCL has no CPU
tensors): ``all_reduce_sum`` and ``any_rank`` move what they are given there.

Entry points join through ``joined``, which leaves the group only once every rank has ended well.
"""

from __future__ import annotations

import contextlib
import gc
import inspect
import os
import sys
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

import torch
import torch.distributed as dist
from torch import nn


@dataclass(frozen=True)
class Context:
    """Where this process sits in the job."""

    rank: int = 0
    """Global rank; rank 0 logs MLLOG and writes results."""
    world_size: int = 1
    """Number of processes."""
    local_rank: int = 0
    """Rank on this node (selects the GPU)."""
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    """Device of this process; the model, its inputs and every collective's tensors live there."""
    backend: str | None = None
    """'nccl', 'gloo', or None for a single process."""
    local_world_size: int = 1
    """Processes on this node (they share its CPUs)."""

    def __post_init__(self) -> None:
        if not 0 <= self.rank < self.world_size:
            raise ValueError(f"rank {self.rank} outside world of {self.world_size}")

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def is_distributed(self) -> bool:
        return self.world_size > 1

    def note(self, workload: str, message: str) -> None:
        """Progress for humans on stderr (stdout carries the MLLOG lines), ``workload: message``; rank 0 only."""
        if self.is_main:
            sys.stderr.write(f"{workload}: {message}\n")
            sys.stderr.flush()


def env_rank(environ: Mapping[str, str] | None = None) -> int:
    """This process's global rank as torchrun set it (0 without torchrun), readable before ``init``."""
    env = os.environ if environ is None else environ
    return int(env.get("RANK") or 0)


def env_world_size(environ: Mapping[str, str] | None = None) -> int:
    """Processes of the whole job as torchrun set them (WORLD_SIZE; 1 without torchrun), readable before ``init``."""
    env = os.environ if environ is None else environ
    return int(env.get("WORLD_SIZE") or 1)


def env_local_world_size(environ: Mapping[str, str] | None = None) -> int:
    """Processes on this node as torchrun set them (LOCAL_WORLD_SIZE, else WORLD_SIZE; 1 without torchrun)."""
    env = os.environ if environ is None else environ
    return int(env.get("LOCAL_WORLD_SIZE") or env.get("WORLD_SIZE") or 1)


def init(device_type: str, environ: Mapping[str, str] | None = None) -> Context:
    """Join the job torchrun describes (WORLD_SIZE > 1), else a single process, on ``device_type``.

    On CUDA the process's GPU is selected before the group exists, so that NCCL and every later
    allocation land on GPU ``LOCAL_RANK`` rather than all on GPU 0.
    """
    env = os.environ if environ is None else environ
    world = env_world_size(env)
    rank = env_rank(env)
    local_rank = int(env.get("LOCAL_RANK") or 0)
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
    return Context(rank=rank, world_size=world, local_rank=local_rank, device=device, backend=backend,
                   local_world_size=env_local_world_size(env))


def no_buffer_broadcast() -> dict[str, bool]:
    """DDP's keyword for "no buffer broadcast before each forward": ``forward_sync_buffers=False``
    where it exists (torch 2.13 on: buffers still start equal, synced once at construction), else
    ``broadcast_buffers=False`` (every rank builds the model from the same seed, so they start equal)."""
    if "forward_sync_buffers" in inspect.signature(nn.parallel.DistributedDataParallel.__init__).parameters:
        return {"forward_sync_buffers": False}
    return {"broadcast_buffers": False}


def wrap(model: nn.Module, ctx: Context, *, buffers_every_forward: bool = True) -> nn.Module:
    """DistributedDataParallel (gradient all-reduce in buckets, overlapped with the backward pass)
    when there is more than one process, else the model itself. ``buffers_every_forward`` False:
    rank 0's buffers (BatchNorm statistics) are not broadcast before each forward (DDP's default),
    so each rank keeps its own, as the MLPerf ResNet reference does."""
    if not ctx.is_distributed:
        return model
    ids = [ctx.device.index] if ctx.device.type == "cuda" else None
    options = {} if buffers_every_forward else no_buffer_broadcast()
    return nn.parallel.DistributedDataParallel(model, device_ids=ids, gradient_as_bucket_view=True, **options)


def all_reduce_sum(tensor: torch.Tensor, ctx: Context) -> torch.Tensor:
    """Sum over ranks of ``tensor``, on ``ctx.device`` (a copy: the argument is left unchanged);
    ``tensor`` itself for one process."""
    if not ctx.is_distributed:
        return tensor
    total = tensor.to(ctx.device, copy=True)
    dist.all_reduce(total, op=dist.ReduceOp.SUM)
    return total


def any_rank(flag: torch.Tensor | bool, ctx: Context) -> bool:
    """Whether ``flag`` (a bool, or a tensor whose elements count as true when non-zero) is true on
    at least one rank; every rank gets the same answer. Waits for the device once."""
    count = torch.as_tensor(flag).ne(0).sum().to(torch.int64)
    return bool(all_reduce_sum(count, ctx).item() > 0)


def broadcast_int(value: int, ctx: Context) -> int:
    """Rank 0's ``value`` on every rank (through a tensor on ``ctx.device``)."""
    if not ctx.is_distributed:
        return value
    holder = torch.tensor([value], dtype=torch.int64, device=ctx.device)
    dist.broadcast(holder, src=0)
    return int(holder.item())


def barrier(ctx: Context) -> None:
    if ctx.is_distributed:
        dist.barrier()


OUTLIVING_DDP = ("a DistributedDataParallel model outlives its process group: gloo's threads may then abort "
                 "the process at exit; run the work in a function the `joined` block calls")


def shutdown(ctx: Context) -> None:
    """Leave the group (entry points leave through `joined`, which meets the other ranks first);
    warns (RuntimeWarning, `OUTLIVING_DDP`) when a DDP model still holds the group."""
    if ctx.is_distributed and dist.is_initialized():
        gc.collect()
        if any(isinstance(obj, nn.parallel.DistributedDataParallel) for obj in gc.get_objects()):
            warnings.warn(OUTLIVING_DDP, RuntimeWarning, stacklevel=2)
        dist.destroy_process_group()


@contextlib.contextmanager
def joined(device_type: str, environ: Mapping[str, str] | None = None) -> Iterator[Context]:
    """`init` for the block, then leave: after a block that ended well, only once every rank has
    ended (a rank that tears down while its peer still talks makes gloo abort the peer); after an
    error, at once (the peer may never come; torchrun stops it).

    The block must not hold a DDP model when it ends (run the work in a function it calls): DDP
    keeps the group alive past ``destroy_process_group``, and gloo's threads then end at the
    interpreter's exit, where they abort the process (SIGABRT, "terminate called without an
    active exception") now and then."""
    ctx = init(device_type, environ)
    try:
        yield ctx
        barrier(ctx)
    finally:
        shutdown(ctx)
