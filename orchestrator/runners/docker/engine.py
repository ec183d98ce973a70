"""The Docker engine mltrain talks to: connecting, the labels that mark mltrain's containers,
removing what a killed orchestrator left, and short-lived helper containers."""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import docker
import docker.errors
import requests.exceptions
from docker.types import Ulimit

from orchestrator.errors import RunnerError, UsageError
from orchestrator.runners.base import LABEL_RUN_ID

HELPER_TIMEOUT_SECONDS = 300
"""Longest a helper container (version probe, cache drop) may take."""
ENGINE_TIMEOUT_SECONDS = 60


def engine_status() -> tuple[bool, str]:
    """Whether a Docker engine answers (for ``--runner auto``), and a sentence saying so."""
    where = engine_address()
    try:
        client = docker.from_env(timeout=5)
    except (docker.errors.DockerException, ValueError) as exc:  # ValueError: a DOCKER_HOST that is no URL
        return False, f"no Docker engine answers at {where} ({short_error(exc)})"
    try:
        version = client.version()
    except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
        return False, f"no Docker engine answers at {where} ({short_error(exc)})"
    finally:
        client.close()
    return True, f"Docker engine {version.get('Version', '?')} answers at {where}"


def connect() -> docker.DockerClient:
    """A client for the engine of DOCKER_HOST (or the default socket); RunnerError when none answers,
    UsageError when DOCKER_HOST is no address at all."""
    where = engine_address()
    try:
        client = docker.from_env(timeout=ENGINE_TIMEOUT_SECONDS)
    except (ValueError, docker.errors.DockerException) as exc:
        # the SDK parses DOCKER_HOST as a URL: '[::1' and a port that is no number are ValueErrors
        if isinstance(exc, ValueError) or "Invalid bind address" in str(exc):
            raise UsageError(f"DOCKER_HOST {where!r} is not an address of a Docker engine ({short_error(exc)}):"
                             " fix it (unix:///var/run/docker.sock, tcp://HOST:PORT) or unset it") from None
        raise _unreachable(where, exc) from None
    try:
        client.ping()
    except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
        client.close()
        raise _unreachable(where, exc) from None
    return client


def _unreachable(where: str, exc: Exception) -> RunnerError:
    return RunnerError(f"cannot reach the Docker engine at {where} ({short_error(exc)}): start dockerd, set"
                       " DOCKER_HOST, or use --runner local")


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
        done = run_container(client, image, argv, timeout_s=HELPER_TIMEOUT_SECONDS, privileged=privileged,
                             user=user, ulimits=ulimits)
    except subprocess.TimeoutExpired:
        raise RunnerError(f"helper container from {image} did not end within {HELPER_TIMEOUT_SECONDS} s") from None
    return done.code, done.output


@dataclass(frozen=True)
class ContainerRun:
    """What a short-lived container printed, and how it ended."""

    code: int
    stdout: str
    stderr: str
    output: str
    """stdout and stderr as they were interleaved."""


def run_container(
    client: docker.DockerClient,
    image: str,
    argv: list[str],
    *,
    timeout_s: float,
    labels: dict[str, str] | None = None,
    on_stderr_line: Callable[[str], None] | None = None,
    **options: Any,
) -> ContainerRun:
    """Run ``argv`` in a fresh container of ``image`` (no network, labelled as mltrain's, ``options``
    as the SDK's ``containers.create`` takes them) to its end, and remove it, also on Ctrl-C. Lines
    of its stderr go to ``on_stderr_line`` as they come. subprocess.TimeoutExpired after ``timeout_s``."""
    try:
        container = client.containers.create(
            image, entrypoint=argv, command=[], network_mode="none", labels={LABEL_RUN_ID: "helper", **(labels or {})},
            detach=True, **options,
        )
    except docker.errors.APIError as exc:
        raise RunnerError(f"cannot create a helper container from {image}: {short_error(exc)}") from None
    try:
        try:
            container.start()
        except docker.errors.APIError as exc:
            raise RunnerError(f"cannot start a helper container from {image}: {short_error(exc)}") from None
        follower = None
        if on_stderr_line is not None:
            stream = container.logs(stream=True, follow=True, stdout=False, stderr=True)
            follower = threading.Thread(target=_follow_lines, args=(stream, on_stderr_line), daemon=True)
            follower.start()
        try:
            result = container.wait(timeout=timeout_s)
        except requests.exceptions.RequestException as exc:
            # Over a unix socket a read timeout can surface as a ConnectionError that says so.
            if isinstance(exc, requests.exceptions.ReadTimeout) or "timed out" in str(exc).lower():
                raise subprocess.TimeoutExpired(argv, timeout_s) from None
            raise
        if follower is not None:
            follower.join(timeout=10)
        return ContainerRun(
            code=int(result.get("StatusCode", -1)),
            stdout=container.logs(stdout=True, stderr=False).decode(errors="replace"),
            stderr=container.logs(stdout=False, stderr=True).decode(errors="replace"),
            output=container.logs(stdout=True, stderr=True).decode(errors="replace"),
        )
    except (docker.errors.APIError, requests.exceptions.RequestException) as exc:
        raise RunnerError(f"helper container from {image} failed: {short_error(exc)}") from None
    finally:
        with contextlib.suppress(docker.errors.APIError, requests.exceptions.RequestException):
            container.remove(force=True, v=True)


def _follow_lines(chunks: Iterable[bytes], on_line: Callable[[str], None]) -> None:
    """Hand complete lines of a log stream to ``on_line`` as they come."""
    pending = ""
    with contextlib.suppress(docker.errors.APIError, requests.exceptions.RequestException):
        for chunk in chunks:
            pending += chunk.decode(errors="replace")
            *lines, pending = pending.split("\n")
            for line in lines:
                on_line(line)
    if pending:
        on_line(pending)


def invoking_user() -> str:
    """``uid:gid`` of this process: containers run as the user who asked, so that what they write into
    /results is that user's (the image's own user, often root, would own it)."""
    return f"{os.getuid()}:{os.getgid()}"


def engine_address() -> str:
    return os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"


def short_error(exc: object) -> str:
    text = getattr(exc, "explanation", None) or str(exc)
    return " ".join(str(text).split())[:300]
