"""``--gpus`` parsing into device requests, and the NVIDIA runtime check (no engine needed)."""

from __future__ import annotations

from pathlib import Path

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


def test_nvidia_runtime_or_cdi_devices_satisfy_the_check(tmp_path: Path):
    check_gpu_support({"Runtimes": {"runc": {}, "nvidia": {"path": "nvidia-container-runtime"}}}, "all")
    cdi = tmp_path / "cdi"
    cdi.mkdir()
    (cdi / "nvidia.yaml").write_text("cdiVersion: 0.5.0\n")
    check_gpu_support({"Runtimes": {"runc": {}}, "CDISpecDirs": [str(cdi), str(tmp_path / "absent")]}, "1")


def test_missing_nvidia_runtime_says_what_to_do(tmp_path: Path):
    (tmp_path / "other.yaml").write_text("x\n")
    with pytest.raises(RunnerError) as caught:
        check_gpu_support({"Runtimes": {"runc": {}, "io.containerd.runc.v2": {}}, "CDISpecDirs": [str(tmp_path)]},
                          "0,1")
    message = str(caught.value)
    assert message.startswith(
        "--gpus 0,1: the Docker engine has no NVIDIA runtime (runtimes: io.containerd.runc.v2, runc)"
    )
    assert "nvidia-ctk runtime configure --runtime=docker" in message and "--gpus none" in message


def test_engine_status_without_engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/absent.sock")
    up, why = engine_status()
    assert not up and why.startswith(f"no Docker engine answers at unix://{tmp_path}/absent.sock (")
