"""A stand-in for CUDA as the probe's checks see it (`workloads.common.probe.device.Device`), on the
CPU: ``gpu_count`` GPUs whose memory is host memory and whose queued work takes at least ``work_s``
between two synchronisations, times the GPU's factor in ``slow`` (2.0: twice as long, so a copy rate
halved, as a link trained at half its width copies). A synchronisation waits as a real one waits for
the GPU's queued work: until that time has passed since the last one. The rates it gives therefore do
not depend on how loaded this machine is, as long as the host's own part of a copy takes less than
``work_s`` (a test comparing rates sets it well above what a loaded host takes). No NUMA node is
known; pinned memory is plain host memory."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from workloads.common.probe.device import Device


@dataclass(frozen=True, kw_only=True)
class FakeGpus(Device):
    kind: str = "cuda"  # type: ignore[assignment]
    gpu_count: int = 2
    work_s: float = 0.02
    """The least time a GPU's queued work takes between two synchronisations (a healthy GPU)."""
    slow: dict[int, float] = field(default_factory=dict)
    """GPU -> how many times longer its work takes (absent: 1)."""
    synced: dict[int, float] = field(default_factory=dict)
    """GPU -> when its last synchronisation returned."""

    @property
    def main(self) -> torch.device:
        return torch.device("cpu")

    def on(self, gpu: int | None) -> torch.device:
        return torch.device("cpu")

    def sync_on(self, gpu: int | None) -> Callable[[], None]:
        index = gpu or 0

        def sync() -> None:
            last = self.synced.get(index)
            if last is not None:
                time.sleep(max(last + self.work_s * self.slow.get(index, 1.0) - time.perf_counter(), 0.0))
            self.synced[index] = time.perf_counter()

        return sync

    def identity(self, gpu: int) -> tuple[str, int]:
        return "Stand-in GPU", 108

    def pinned(self, nbytes: int) -> torch.Tensor:
        return torch.empty(nbytes, dtype=torch.uint8)

    def local_cpus(self, gpu: int | None) -> set[int] | None:
        return None

    def free(self) -> None:
        return None
