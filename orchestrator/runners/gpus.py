"""``--gpus``: which GPUs a run asks for, the same words for every runner.

``all`` | ``N`` (a count: the first N) | ``0,1`` or ``device=0,1`` (device indices or UUIDs) |
``none``. Each runner turns the request into what its platform understands: the local runner
into ``CUDA_VISIBLE_DEVICES``, Docker into a device request, Slurm into ``--gres=gpu:N`` (Slurm
then sets ``CUDA_VISIBLE_DEVICES`` itself). The workloads' ``NPROC=auto`` counts the devices
they see, so the request reaches them either way; telemetry samples the same devices.

Every job mltrain starts (seeds, qualification steps, dataset commands) numbers GPUs as NVML,
nvidia-smi and Docker's device ids do, in PCI bus order (`device_order_env`): CUDA's default puts
the fastest GPU first, which on a node of mixed models makes CUDA's GPU 1 another GPU than NVML's.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

from orchestrator.errors import UsageError

CUDA_VISIBLE_DEVICES = "CUDA_VISIBLE_DEVICES"
MAX_GPUS = 256
"""More GPUs than one job of any runner can be given (a node holds at most 16 today)."""
CUDA_DEVICE_ORDER = "CUDA_DEVICE_ORDER"
_GPU_IDS = re.compile(r"^[0-9a-zA-Z-]+(,[0-9a-zA-Z-]+)*$")


@dataclass(frozen=True, kw_only=True)
class GpuRequest:
    """Which GPUs a run gets, parsed from ``--gpus``."""

    spec: str
    """As the user wrote it: all, N, 0,1 (device ids) or none."""
    count: int = 0
    """Number of GPUs (-1: all); 0 with no ids: none."""
    device_ids: tuple[str, ...] = ()
    """Explicit device indices or UUIDs."""

    def __post_init__(self) -> None:
        if self.count < -1:
            raise UsageError(f"--gpus {self.spec!r}: count must be positive")
        if self.count and self.device_ids:
            raise UsageError(f"--gpus {self.spec!r}: give a count or device ids, not both")

    @property
    def wanted(self) -> bool:
        return self.count != 0 or bool(self.device_ids)

    def devices(self, visible: tuple[str, ...] | None) -> tuple[str, ...] | None:
        """The devices the run gets, out of ``visible`` (None: every GPU of the host). None means
        all of them; a count takes the first N, as Docker and CUDA number them."""
        if self.device_ids:
            return self.device_ids
        if self.count == -1:
            return visible
        pool = visible if visible is not None else tuple(str(i) for i in range(self.count))
        return pool[: self.count]


def parse_gpus(spec: str) -> GpuRequest:
    """``all`` | ``N`` (a count) | ``0,1`` or ``device=0,1`` (device ids) | ``none``."""
    text = spec.strip()
    if text == "none":
        return GpuRequest(spec=spec)
    if text == "all":
        return GpuRequest(spec=spec, count=-1)
    if text.isdigit() and "," not in text:
        if int(text) == 0:
            raise UsageError("--gpus 0 asks for no GPU: write --gpus none (or --gpus device=0 for device 0)")
        if int(text) > MAX_GPUS:
            raise UsageError(f"--gpus {text}: more GPUs than a job can have (at most {MAX_GPUS}); give the count one"
                             " node's job uses, or all")
        return GpuRequest(spec=spec, count=int(text))
    ids = text.removeprefix("device=")
    if ("," in text or text.startswith("device=")) and _GPU_IDS.match(ids):
        device_ids = tuple(ids.split(","))
        if len(device_ids) > MAX_GPUS or len(set(device_ids)) != len(device_ids):
            raise UsageError(f"--gpus {spec[:60]!r}: give each device once, at most {MAX_GPUS} of them")
        return GpuRequest(spec=spec, device_ids=device_ids)
    raise UsageError(f"--gpus {spec!r}: use all, a count (2), device ids (0,1 or device=0) or none")


def visible_devices(env: Mapping[str, str]) -> tuple[str, ...] | None:
    """The devices ``CUDA_VISIBLE_DEVICES`` of ``env`` lets CUDA see; None when it is not set."""
    value = env.get(CUDA_VISIBLE_DEVICES)
    if value is None:
        return None
    return tuple(part.strip() for part in value.split(",") if part.strip())


def device_order_env(environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """``CUDA_DEVICE_ORDER`` for a job: the user's where they set one, else PCI_BUS_ID (NVML's order)."""
    return {CUDA_DEVICE_ORDER: environ.get(CUDA_DEVICE_ORDER) or "PCI_BUS_ID"}
