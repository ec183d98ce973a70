"""GPUs for containers: what ``--gpus`` asks for, and whether the engine can hand them out."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from docker.types import DeviceRequest

from orchestrator.errors import RunnerError, UsageError

_GPU_IDS = re.compile(r"^[0-9a-zA-Z-]+(,[0-9a-zA-Z-]+)*$")


@dataclass(frozen=True, kw_only=True)
class GpuRequest:
    """Which GPUs a container gets, parsed from ``--gpus``."""

    spec: str
    """As the user wrote it: all, N, 0,1 (device ids) or none."""
    count: int = 0
    """Number of GPUs (-1: all); 0 with no ids: none."""
    device_ids: tuple[str, ...] = ()
    """Explicit device ids or UUIDs."""

    def __post_init__(self) -> None:
        if self.count < -1:
            raise UsageError(f"--gpus {self.spec!r}: count must be positive")
        if self.count and self.device_ids:
            raise UsageError(f"--gpus {self.spec!r}: give a count or device ids, not both")

    @property
    def wanted(self) -> bool:
        return self.count != 0 or bool(self.device_ids)

    def device_requests(self) -> list[DeviceRequest]:
        if not self.wanted:
            return []
        if self.device_ids:
            return [DeviceRequest(device_ids=list(self.device_ids), capabilities=[["gpu"]])]
        return [DeviceRequest(count=self.count, capabilities=[["gpu"]])]


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
        return GpuRequest(spec=spec, count=int(text))
    ids = text.removeprefix("device=")
    if ("," in text or text.startswith("device=")) and _GPU_IDS.match(ids):
        return GpuRequest(spec=spec, device_ids=tuple(ids.split(",")))
    raise UsageError(f"--gpus {spec!r}: use all, a count (2), device ids (0,1 or device=0) or none")


def check_gpu_support(info: dict[str, Any], spec: str) -> None:
    """RunnerError unless the engine can hand GPUs to containers (NVIDIA runtime or CDI devices)."""
    runtimes = sorted(info.get("Runtimes") or {})
    if "nvidia" in runtimes:
        return
    cdi_dirs = [Path(d) for d in info.get("CDISpecDirs") or []]
    if any(p.name.startswith("nvidia") for d in cdi_dirs if d.is_dir() for p in d.iterdir()):
        return
    raise RunnerError(
        f"--gpus {spec}: the Docker engine has no NVIDIA runtime (runtimes: {', '.join(runtimes) or 'none'})"
        " and no NVIDIA CDI devices: install the NVIDIA Container Toolkit, run"
        " `nvidia-ctk runtime configure --runtime=docker`, restart dockerd; or use --gpus none"
    )
