"""Faults that must end in one line and exit 3 (an infrastructure fault): no engine, a failing build, GPUs asked of
an engine without the NVIDIA runtime; and `--runner auto` saying which runner it chose and why."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.docker

BROKEN_DOCKERFILE = """\
ARG BASE_IMAGE=mltrain-test-base:bookworm
FROM ${BASE_IMAGE}
RUN echo preparing the broken step
RUN echo "about to fail: $((40 + 2))" && false
COPY workloads/ /workspace/workloads/
"""


def _one_error_line(err: str) -> str:
    lines = [line for line in err.strip().splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_engine_not_running_is_one_line_and_non_zero(cli_with_build, tmp_path: Path, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    r = cli_with_build("run", "fakebench", "--runner", "docker", "--seeds", "1", "--results", str(tmp_path / "r"))
    assert r.code == 3  # an infrastructure fault
    line = _one_error_line(r.err)
    assert "cannot reach the Docker engine" in line and "no-engine.sock" in line and "--runner local" in line
    assert not (tmp_path / "r").exists() or not any((tmp_path / "r").glob("*/manifest.json"))
    built = cli_with_build("build", "fakebench")
    assert built.code == 3 and "cannot reach the Docker engine" in _one_error_line(built.err)
    cleaned = cli_with_build("clean")
    assert cleaned.code == 3 and "cannot reach the Docker engine" in _one_error_line(cleaned.err)


def test_runner_auto_without_engine_says_local_and_why(cli, tmp_path: Path, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    r = cli("run", "fakebench", "--runner", "auto", "--seeds", "1-3", "--results", str(tmp_path / "r"))
    assert r.code == 0, r.err
    assert "runner: local (no Docker engine answers at unix://" in r.err


@pytest.mark.usefixtures("docker_engine", "no_leftover_containers")
def test_runner_auto_with_engine_says_docker(docker_cli, tmp_path: Path):
    r = docker_cli("run", "fakebench", "--runner", "auto", "--seeds", "1-3", "--results", str(tmp_path / "r"))
    assert r.code == 0, r.err
    assert "runner: docker (Docker engine " in r.err and "answers at" in r.err


@pytest.mark.usefixtures("docker_engine", "no_leftover_containers")
def test_failing_build_names_the_step_and_its_output(docker_cli, tmp_path: Path, monkeypatch):
    workloads = tmp_path / "workloads"
    broken = workloads / "brokenbench"
    broken.mkdir(parents=True)
    (broken / "Dockerfile").write_text(BROKEN_DOCKERFILE)
    (broken / "workload.yaml").write_text(
        "name: brokenbench\nmlperf_benchmark: unet3d\nrun: [bash, run.sh]\n"
        "quality: {metric: eval_accuracy, better: higher, target: 0.9, env: QUALITY_THRESHOLD}\n"
        "data: {cli: [python3, dataset.py]}\n"
        f"image: {{dockerfile: {broken / 'Dockerfile'}}}\n"
    )
    monkeypatch.setenv("MLTRAIN_WORKLOADS", str(workloads))
    r = docker_cli("build", "brokenbench")
    assert r.code == 3
    line = _one_error_line(r.err)
    assert "failed at Step 4/" in line and ": RUN echo \"about to fail: $((40 + 2))\" && false:" in line, line
    assert "returned a non-zero code: 1" in line and "(last output: about to fail: 42)" in line, line
    assert "about to fail: 42" in r.err.split(line)[0]  # the step's output streamed before the error
    assert r.out == ""


@pytest.mark.usefixtures("docker_engine", "no_leftover_containers")
def test_missing_base_image_says_so(docker_cli, monkeypatch):
    r = docker_cli("build", "fakebench", "--base-image", "mltrain-test-missing:nope")
    assert r.code == 3
    line = _one_error_line(r.err)
    assert "base image mltrain-test-missing:nope is not in the engine" in line, line


@pytest.mark.usefixtures("docker_engine", "no_leftover_containers")
@pytest.mark.parametrize("gpus", ["all", "2", "0,1"])
def test_gpus_without_nvidia_runtime_is_one_line_before_any_build(docker_cli, docker_engine, tmp_path: Path, gpus):
    if "nvidia" in (docker_engine.info().get("Runtimes") or {}):
        pytest.skip("this engine has the NVIDIA runtime")
    r = docker_cli("run", "fakebench", "--runner", "docker", "--gpus", gpus, "--seeds", "1",
                   "--results", str(tmp_path / "r"))
    assert r.code == 3
    line = _one_error_line(r.err)
    assert f"--gpus {gpus}: the Docker engine cannot give containers GPUs (it answered could not select device" \
        " driver" in line and "--gpus none" in line
    assert "Step 1/" not in r.err and "started" not in r.err


@pytest.mark.parametrize(
    ("gpus", "message"),
    [("0", "--gpus 0 asks for no GPU"), ("some", "--gpus 'some': use all"), ("1,,2", "--gpus '1,,2'")],
)
def test_bad_gpus_value_is_a_usage_error(cli, tmp_path: Path, gpus: str, message: str):
    r = cli("run", "fakebench", "--runner", "docker", "--gpus", gpus, "--seeds", "1", "--results", str(tmp_path))
    assert r.code == 2
    assert message in _one_error_line(r.err)
