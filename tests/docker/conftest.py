"""Fixtures of the Docker tests: a real engine (DOCKER_HOST, started by .ci/docker-engine.sh), the
local base images (made by .ci/base-images.sh), and the CLI with the build and clean commands.

Modules that need the engine say ``pytestmark = pytest.mark.usefixtures("docker_engine")``: every
test in them is skipped when no engine answers at DOCKER_HOST, and fails instead when
MLTRAIN_REQUIRE_DOCKER=1 (as CI sets it, so that a missing engine cannot pass as green).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import docker
import docker.errors
import pytest

from orchestrator.runners.base import LABEL_RUN_ID

TESTS = Path(__file__).resolve().parent.parent
PROJECT = TESTS.parent
TEST_BASE = "mltrain-test-base:bookworm"
TORCH_BASE = "mltrain-torch-base:2.13.0-cpu"
BASE_IMAGES_SCRIPT = PROJECT / ".ci" / "base-images.sh"
REQUIRE_ENV = "MLTRAIN_REQUIRE_DOCKER"


def _engine_or_reason() -> tuple[docker.DockerClient | None, str]:
    if not os.environ.get("DOCKER_HOST"):
        return None, "DOCKER_HOST is not set (start an engine with .ci/docker-engine.sh)"
    try:
        client = docker.from_env(timeout=120)
        client.ping()
    except Exception as exc:  # noqa: BLE001 - any failure means: no engine to test against
        return None, f"no Docker engine answers at {os.environ['DOCKER_HOST']}: {exc}"
    return client, ""


@pytest.fixture(scope="session")
def docker_engine() -> Iterator[docker.DockerClient]:
    client, reason = _engine_or_reason()
    if client is None:
        if os.environ.get(REQUIRE_ENV) == "1":  # CI: a missing engine is a failure, not a skip
            pytest.fail(reason)
        pytest.skip(reason)
    yield client
    client.close()


def _make_base(which: str) -> None:
    result = subprocess.run(
        ["bash", str(BASE_IMAGES_SCRIPT), which], cwd=PROJECT, capture_output=True, text=True, timeout=1800
    )
    if result.returncode != 0:
        pytest.fail(f"{BASE_IMAGES_SCRIPT.name} {which} failed: {result.stderr.strip()[-2000:]}")


@pytest.fixture(scope="session")
def test_base_image(docker_engine: docker.DockerClient) -> str:
    _make_base("test")
    return TEST_BASE


@pytest.fixture(scope="session")
def torch_base_image(docker_engine: docker.DockerClient) -> str:
    _make_base("torch")
    return TORCH_BASE


@pytest.fixture
def cli_with_build(cli, monkeypatch: pytest.MonkeyPatch):
    """The in-process CLI, with `build` and `clean` registered even before the core lists them."""
    import orchestrator.cli as cli_module

    wanted = tuple(dict.fromkeys((*cli_module.COMMAND_MODULES, "build", "clean")))
    monkeypatch.setattr(cli_module, "COMMAND_MODULES", wanted)
    return cli


@pytest.fixture
def docker_cli(cli_with_build, test_base_image: str):
    """`cli_with_build` against the engine, with the test base image made."""
    return cli_with_build


@dataclass(frozen=True)
class Seen:
    """A container as the engine lists it."""

    id: str
    name: str
    status: str
    labels: dict[str, str]


def mltrain_containers(client: docker.DockerClient, run_id: str | None = None) -> list[Seen]:
    """Containers carrying mltrain's run label (of one run when given), running or not. Listed
    without inspecting each, so a container removed meanwhile is no error."""
    label = f"{LABEL_RUN_ID}={run_id}" if run_id else LABEL_RUN_ID
    return [
        Seen(id=c["Id"], name=c["Names"][0].lstrip("/"), status=c["State"], labels=c.get("Labels") or {})
        for c in client.api.containers(all=True, filters={"label": label})
    ]


@pytest.fixture
def containers(docker_engine: docker.DockerClient) -> Callable[..., list[Seen]]:
    """``containers(run_id=None)``: mltrain's containers in the engine."""
    return lambda run_id=None: mltrain_containers(docker_engine, run_id)


@pytest.fixture
def no_leftover_containers(docker_engine: docker.DockerClient) -> Iterator[None]:
    """Fail a test that leaves any mltrain container behind (and remove them for the next test)."""
    before = {c.id for c in mltrain_containers(docker_engine)}
    yield
    left = [c for c in mltrain_containers(docker_engine) if c.id not in before]
    for container in left:
        with contextlib.suppress(docker.errors.NotFound):
            docker_engine.api.remove_container(container.id, force=True)
    assert not left, f"containers left behind: {[c.name for c in left]}"


def _wait_for(condition: Callable[[], object], timeout_s: float, what: str) -> object:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


@pytest.fixture
def wait_for() -> Callable[[Callable[[], object], float, str], object]:
    """``wait_for(condition, timeout_s, what)``: poll until truthy, else fail naming `what`."""
    return _wait_for
