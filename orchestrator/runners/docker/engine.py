"""The Docker engine mltrain talks to: connecting, the labels that mark mltrain's containers,
removing what a killed orchestrator left, and short-lived helper containers."""

from __future__ import annotations

import contextlib
import os

import docker
import docker.errors
import requests.exceptions
from docker.types import Ulimit

from orchestrator.errors import RunnerError

LABEL_RUN_ID = "mltrain.run_id"
LABEL_SEED = "mltrain.seed"
LABEL_WORKLOAD = "mltrain.workload"
HELPER_TIMEOUT_SECONDS = 300
"""Longest a helper container (version probe, cache drop) may take."""
ENGINE_TIMEOUT_SECONDS = 60


def engine_status() -> tuple[bool, str]:
    """Whether a Docker engine answers (for ``--runner auto``), and a sentence saying so."""
    where = engine_address()
    try:
        client = docker.from_env(timeout=5)
    except docker.errors.DockerException as exc:
        return False, f"no Docker engine answers at {where} ({short_error(exc)})"
    try:
        version = client.version()
    except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
        return False, f"no Docker engine answers at {where} ({short_error(exc)})"
    finally:
        client.close()
    return True, f"Docker engine {version.get('Version', '?')} answers at {where}"


def connect() -> docker.DockerClient:
    """A client for the engine of DOCKER_HOST (or the default socket); RunnerError when none answers."""
    where = engine_address()
    try:
        client = docker.from_env(timeout=ENGINE_TIMEOUT_SECONDS)
        client.ping()
    except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
        raise RunnerError(
            f"cannot reach the Docker engine at {where} ({short_error(exc)}): start dockerd, set DOCKER_HOST,"
            " or use --runner local"
        ) from None
    return client


def remove_leftovers(client: docker.DockerClient, run_id: str | None = None) -> list[str]:
    """Force-remove every container carrying mltrain's run label (of one run when `run_id` is given);
    return their names."""
    label = f"{LABEL_RUN_ID}={run_id}" if run_id else LABEL_RUN_ID
    removed: list[str] = []
    # Listed sparse (no inspect per container): one that vanishes meanwhile is no error.
    for container in client.containers.list(all=True, sparse=True, filters={"label": label}):
        names = container.attrs.get("Names") or [container.id]
        try:
            container.remove(force=True, v=True)
        except docker.errors.NotFound:
            continue
        except docker.errors.APIError as exc:
            if exc.status_code == 409:  # already being removed
                continue
            raise RunnerError(f"cannot remove container {names[0].lstrip('/')}: {short_error(exc)}") from None
        removed.append(str(names[0]).lstrip("/"))
    return removed


def run_helper(
    client: docker.DockerClient,
    image: str,
    argv: list[str],
    *,
    privileged: bool = False,
    user: str | None = None,
    ulimits: list[Ulimit] | None = None,
) -> tuple[int, str]:
    """Run a short-lived container (no network, labelled as mltrain's) and return (exit code, output)."""
    try:
        container = client.containers.create(
            image,
            entrypoint=argv,
            command=[],
            network_mode="none",
            privileged=privileged,
            user=user,
            ulimits=ulimits,
            labels={LABEL_RUN_ID: "helper"},
            detach=True,
        )
    except docker.errors.APIError as exc:
        raise RunnerError(f"cannot create a helper container from {image}: {short_error(exc)}") from None
    try:
        try:
            container.start()
        except docker.errors.APIError as exc:
            raise RunnerError(f"cannot start a helper container from {image}: {short_error(exc)}") from None
        result = container.wait(timeout=HELPER_TIMEOUT_SECONDS)
        output = container.logs(stdout=True, stderr=True).decode(errors="replace")
        return int(result.get("StatusCode", -1)), output
    except (docker.errors.APIError, requests.exceptions.RequestException) as exc:
        raise RunnerError(f"helper container from {image} failed: {short_error(exc)}") from None
    finally:
        with contextlib.suppress(docker.errors.APIError):
            container.remove(force=True, v=True)


def engine_address() -> str:
    return os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"


def short_error(exc: object) -> str:
    text = getattr(exc, "explanation", None) or str(exc)
    return " ".join(str(text).split())[:300]
