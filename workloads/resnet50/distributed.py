"""Data parallelism through ``torchrun``: one process per device, gradients all-reduced by DDP.

``torchrun`` sets RANK, WORLD_SIZE and LOCAL_RANK; without them the run is a single process and
nothing here touches ``torch.distributed``. CPU processes talk over gloo, GPUs over NCCL.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn


@dataclass(frozen=True, kw_only=True)
class Context:
    """Where this process sits in the job."""

    rank: int = 0
    """Global rank; rank 0 logs and writes results."""
    world: int = 1
    """Number of processes."""
    local_rank: int = 0
    """Rank on this node (selects the GPU)."""
    device: torch.device = torch.device("cpu")
    """Device of this process."""

    def __post_init__(self) -> None:
        if not 0 <= self.rank < self.world:
            raise ValueError(f"rank {self.rank} outside world of {self.world}")

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world > 1


def init(environ: dict[str, str] | None = None) -> Context:
    """Join the process group torchrun describes (if any) and pick this process's device."""
    env = os.environ if environ is None else environ
    world = int(env.get("WORLD_SIZE", "1"))
    rank = int(env.get("RANK", "0"))
    local_rank = int(env.get("LOCAL_RANK", "0"))
    if torch.cuda.is_available():
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    if world > 1 and not dist.is_initialized():
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo", rank=rank, world_size=world)
    return Context(rank=rank, world=world, local_rank=local_rank, device=device)


def wrap(model: nn.Module, context: Context) -> nn.Module:
    """DistributedDataParallel when there is more than one process, else the model itself."""
    if not context.distributed:
        return model
    ids = [context.device.index] if context.device.type == "cuda" else None
    return nn.parallel.DistributedDataParallel(model, device_ids=ids)


def sum_all(values: list[float], context: Context) -> list[float]:
    """Element-wise sum of ``values`` over all processes (float64 on the wire)."""
    if not context.distributed:
        return list(values)
    tensor = torch.tensor(values, dtype=torch.float64, device=context.device)
    dist.all_reduce(tensor)
    return tensor.tolist()


def barrier(context: Context) -> None:
    if context.distributed:
        dist.barrier()


def shutdown(context: Context) -> None:
    if context.distributed and dist.is_initialized():
        dist.destroy_process_group()
