"""GPUs for containers: the device request for ``--gpus``, and whether the engine hands GPUs out.

The engine is asked, not the local file system: ``docker run --gpus`` needs only the NVIDIA
Container Toolkit's hook where dockerd runs (no ``nvidia`` runtime, no CDI specs), and with a remote
``DOCKER_HOST`` this machine's files say nothing about that host. So the check starts a throwaway
container with the seeds' device request and reads what ``nvidia-smi -L`` lists inside it.
"""

from __future__ import annotations

import subprocess

import docker
from docker.types import DeviceRequest

from orchestrator.errors import RunnerError
from orchestrator.runners.docker.engine import HELPER_TIMEOUT_SECONDS, run_container
from orchestrator.runners.gpus import GpuRequest

NO_GPU_DRIVER = "could not select device driver"
"""What dockerd answers when nothing on its host can satisfy a GPU device request."""
# A constant: no user input reaches this shell. `|| true`: an image without nvidia-smi (CDI
# without the utility capability) still proves the engine accepted the request.
LIST_GPUS = ["sh", "-c", "nvidia-smi -L 2>&1 || true"]
ADVICE = ("install the NVIDIA Container Toolkit where dockerd runs and restart dockerd"
          " (`nvidia-ctk runtime configure --runtime=docker` adds the nvidia runtime too); or use --gpus none")


def device_requests(request: GpuRequest) -> list[DeviceRequest]:
    """The engine's device request for ``--gpus`` (a count gets devices 0..N-1)."""
    if not request.wanted:
        return []
    if request.device_ids:
        return [DeviceRequest(device_ids=list(request.device_ids), capabilities=[["gpu"]])]
    return [DeviceRequest(count=request.count, capabilities=[["gpu"]])]


def check_gpu_support(client: docker.DockerClient, image: str, request: GpuRequest, *, user: str) -> list[str]:
    """Start a container of ``image`` with ``request``'s devices; the GPUs listed inside it (empty
    where the image has no nvidia-smi). RunnerError, saying what to do, when the engine refuses."""
    try:
        done = run_container(client, image, LIST_GPUS, timeout_s=HELPER_TIMEOUT_SECONDS, user=user,
                             device_requests=device_requests(request))
    except RunnerError as exc:
        text = str(exc)
        if NO_GPU_DRIVER in text:
            raise RunnerError(f"--gpus {request.spec}: the Docker engine cannot give containers GPUs (it answered"
                              f" {text.split(': ', 1)[-1]}): {ADVICE}") from None
        raise RunnerError(f"--gpus {request.spec}: a container with GPUs could not start ({text}); check the"
                          " NVIDIA driver and Container Toolkit where dockerd runs (`nvidia-smi` there)") from None
    except subprocess.TimeoutExpired:
        raise RunnerError(f"--gpus {request.spec}: a container with GPUs did not end within"
                          f" {HELPER_TIMEOUT_SECONDS} s") from None
    return [line.strip() for line in done.output.splitlines() if line.strip().startswith(("GPU ", "MIG "))]
