"""``--gpus`` parsing into device requests, and the engine asked whether it hands out GPUs (a stand-in
engine here; tests/docker/test_docker_faults.py asks the real one)."""

from __future__ import annotations

from pathlib import Path

import docker.errors
import pytest

from orchestrator.errors import RunnerError, UsageError
from orchestrator.runners.docker.engine import engine_status
from orchestrator.runners.docker.gpus import check_gpu_support, device_requests
from orchestrator.runners.docker.runner import DockerRunner
from orchestrator.runners.gpus import parse_gpus


@pytest.mark.parametrize(
    ("spec", "count", "ids"),
    [("all", -1, []), ("2", 2, []), ("0,1", 0, ["0", "1"]), ("device=3", 0, ["3"]),
     ("GPU-1a2b,GPU-3c4d", 0, ["GPU-1a2b", "GPU-3c4d"])],
)
def test_gpu_specs_become_device_requests(spec: str, count: int, ids: list[str]):
    (request,) = device_requests(parse_gpus(spec))
    assert request["Capabilities"] == [["gpu"]]
    assert request["Count"] == count and request["DeviceIDs"] == ids


def test_no_gpus_means_no_device_request():
    assert device_requests(parse_gpus("none")) == [] and not parse_gpus("none").wanted


@pytest.mark.parametrize("spec", ["0", "-1", "some", "1,,2", "device=", "0;rm -rf /", ""])
def test_bad_gpu_specs_are_usage_errors(spec: str):
    with pytest.raises(UsageError) as caught:
        parse_gpus(spec)
    assert "\n" not in str(caught.value) and "--gpus" in str(caught.value)


@pytest.mark.parametrize("shm", ["", "1x", "-1g", "1 g", "0"])
def test_bad_shm_size_is_a_usage_error(shm: str):
    with pytest.raises(UsageError, match="--shm-size"):
        DockerRunner(Path("."), shm_size=shm)


class Engine:
    """A stand-in for a Docker engine's container API, answering a GPU device request the way dockerd
    does: with the NVIDIA Container Toolkit's hook on its host (nvidia-smi lists the GPUs inside), or
    without it (dockerd's own refusal at start), or with a hook whose driver is broken."""

    NO_DRIVER = 'could not select device driver "" with capabilities: [[gpu]]'
    HOOK_FAILED = ("failed to create task for container: OCI runtime create failed: nvidia-container-cli:"
                   " initialization error: driver rpc error: timed out: unknown")

    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.created: list[dict] = []
        self.removed = 0
        self.containers = self

    def create(self, image: str, **options):
        self.created.append({"image": image, **options})
        return self

    def start(self) -> None:
        if self.answer != "hook":
            raise docker.errors.APIError("500 Server Error", explanation=self.answer)

    def wait(self, timeout: float):
        return {"StatusCode": 0}

    def logs(self, **_: object) -> bytes:
        return (b"GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0e2a)\n"
                b"GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-77c1)\n")

    def remove(self, **_: object) -> None:
        self.removed += 1


def test_an_engine_with_the_toolkit_hook_alone_satisfies_the_check():
    # No nvidia runtime and no CDI specs on this machine (a remote DOCKER_HOST): `docker run --gpus`
    # works there, so the check asks the engine and lists what the container sees.
    engine = Engine("hook")
    seen = check_gpu_support(engine, "base:1", parse_gpus("0,1"), user="1000:1000")
    assert seen == ["GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0e2a)", "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-77c1)"]
    (made,) = engine.created
    assert made["device_requests"] == device_requests(parse_gpus("0,1")) and made["network_mode"] == "none"
    assert engine.removed == 1


def test_an_engine_that_cannot_hand_out_gpus_says_what_to_do():
    with pytest.raises(RunnerError) as caught:
        check_gpu_support(Engine(Engine.NO_DRIVER), "base:1", parse_gpus("all"), user="0:0")
    message = str(caught.value)
    assert message.startswith("--gpus all: the Docker engine cannot give containers GPUs (it answered could not"
                              " select device driver")
    assert "NVIDIA Container Toolkit" in message and "--gpus none" in message and "\n" not in message


def test_a_broken_driver_behind_the_hook_is_named():
    with pytest.raises(RunnerError) as caught:
        check_gpu_support(Engine(Engine.HOOK_FAILED), "base:1", parse_gpus("2"), user="0:0")
    assert "--gpus 2: a container with GPUs could not start" in str(caught.value)
    assert "nvidia-container-cli: initialization error" in str(caught.value)


def test_engine_status_without_engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/absent.sock")
    up, why = engine_status()
    assert not up and why.startswith(f"no Docker engine answers at unix://{tmp_path}/absent.sock (")
