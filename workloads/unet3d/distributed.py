"""Data-parallel helpers: process group from torchrun's environment (gloo on CPU, nccl on GPU)."""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass(frozen=True, kw_only=True)
class ProcessGroup:
    """Where this process sits in the job."""

    rank: int = 0
    """Global rank (0 logs MLLOG)."""
    world_size: int = 1
    """Number of processes."""
    local_rank: int = 0
    """Rank on this node (picks the GPU)."""

    def __post_init__(self) -> None:
        if not 0 <= self.rank < self.world_size:
            raise ValueError(f"rank {self.rank} outside world of {self.world_size}")

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def is_distributed(self) -> bool:
        return self.world_size > 1


def init_process_group(device: torch.device) -> ProcessGroup:
    """Join the job torchrun started (WORLD_SIZE > 1), else a single-process group."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return ProcessGroup()
    backend = "nccl" if device.type == "cuda" else "gloo"
    dist.init_process_group(backend=backend)
    return ProcessGroup(
        rank=dist.get_rank(), world_size=dist.get_world_size(), local_rank=int(os.environ.get("LOCAL_RANK", "0"))
    )


def all_reduce_sum(tensor: torch.Tensor, group: ProcessGroup) -> torch.Tensor:
    """Sum over ranks (a no-op for one process)."""
    if group.is_distributed:
        tensor = tensor.clone()
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return tensor


def broadcast_int(value: int, group: ProcessGroup) -> int:
    """Rank 0's ``value`` on every rank."""
    if not group.is_distributed:
        return value
    holder = torch.tensor([value], dtype=torch.int64)
    dist.broadcast(holder, src=0)
    return int(holder.item())


def barrier(group: ProcessGroup) -> None:
    if group.is_distributed:
        dist.barrier()


def shutdown(group: ProcessGroup) -> None:
    if group.is_distributed and dist.is_initialized():
        dist.destroy_process_group()
