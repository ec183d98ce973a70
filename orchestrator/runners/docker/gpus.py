"""GPUs for containers: the device request for ``--gpus``, and whether the engine can hand GPUs out."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from docker.types import DeviceRequest

from orchestrator.errors import RunnerError
from orchestrator.runners.gpus import GpuRequest


def device_requests(request: GpuRequest) -> list[DeviceRequest]:
    """The engine's device request for ``--gpus`` (a count gets devices 0..N-1)."""
    if not request.wanted:
        return []
    if request.device_ids:
        return [DeviceRequest(device_ids=list(request.device_ids), capabilities=[["gpu"]])]
    return [DeviceRequest(count=request.count, capabilities=[["gpu"]])]


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
