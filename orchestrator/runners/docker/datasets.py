"""Dataset commands in a helper container of the workload's image.

A host with only the orchestrator installed (no torch, no nibabel) can then make and prepare
data: the workload's dataset command line runs where its seeds run, with what the image has.
Each host folder argument is bind-mounted at ``/mnt/mltrain/<n>`` (read-only unless the command
writes there); the container has no network, runs as the caller's uid:gid, carries mltrain's
labels (so `mltrain clean` finds one a killed orchestrator left), and is removed afterwards.
"""

from __future__ import annotations

import contextlib
import subprocess
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import docker
import docker.errors
import requests.exceptions
from docker.types import Mount

from orchestrator.config.workloads import Workload
from orchestrator.errors import RunnerError
from orchestrator.runners.base import DatasetArg, DatasetResult, HostPath, host_text
from orchestrator.runners.docker.engine import LABEL_RUN_ID, LABEL_WORKLOAD, short_error

MOUNT_BASE = "/mnt/mltrain"
HELPER_LABEL = "dataset-command"
"""Value of mltrain's run label on these containers."""


def container_args(args: Sequence[DatasetArg]) -> tuple[list[str], list[Mount], tuple[tuple[str, Path], ...]]:
    """The arguments as the container sees them, the mounts that make that true, and
    (container path, host path) of each mount. One mount per distinct folder; a folder mounted
    writable by one argument is writable for all."""
    roots: dict[str, bool] = {}
    for arg in args:
        if isinstance(arg, HostPath):
            key = str(arg.root.resolve())
            roots[key] = roots.get(key, False) or arg.writable
    inside = {root: f"{MOUNT_BASE}/{n}" for n, root in enumerate(roots)}
    argv = []
    for arg in args:
        if isinstance(arg, HostPath):
            root = arg.root.resolve()
            relative = arg.path.resolve().relative_to(root).as_posix()
            where = inside[str(root)]
            argv.append(where if relative == "." else f"{where}/{relative}")
        else:
            argv.append(arg)
    mounts = [Mount(inside[root], root, type="bind", read_only=not writable) for root, writable in roots.items()]
    return argv, mounts, tuple((inside[root], Path(root)) for root in roots)


def run_dataset_command(
    client: docker.DockerClient,
    image: str,
    workload: Workload,
    command: list[str],
    args: Sequence[DatasetArg],
    *,
    user: str,
    working_dir: str,
    timeout_s: float,
    on_line: Callable[[str], None],
) -> DatasetResult:
    """Run ``command + args`` in a fresh container of ``image``; stderr lines go to ``on_line``."""
    argv, mounts, seen = container_args(args)
    try:
        container = client.containers.create(
            image, entrypoint=[*command, *argv], command=[], network_mode="none", user=user,
            working_dir=working_dir, environment={"HOME": "/tmp", "PYTHONUNBUFFERED": "1"}, mounts=mounts,
            labels={LABEL_RUN_ID: HELPER_LABEL, LABEL_WORKLOAD: workload.name}, init=True, detach=True,
        )
    except docker.errors.APIError as exc:
        raise RunnerError(f"cannot create a dataset container from {image}: {short_error(exc)}") from None
    try:
        try:
            container.start()
        except docker.errors.APIError as exc:
            raise RunnerError(f"cannot start a dataset container from {image}: {short_error(exc)}") from None
        follower = threading.Thread(
            target=_follow, args=(container.logs(stream=True, follow=True, stdout=False, stderr=True),
                                  lambda line: on_line(host_text(line, seen))),
            daemon=True,
        )
        follower.start()
        try:
            status = container.wait(timeout=timeout_s)
        except requests.exceptions.RequestException as exc:
            # Over a unix socket, a read timeout can surface as a ConnectionError saying so.
            if isinstance(exc, requests.exceptions.ReadTimeout) or "timed out" in str(exc).lower():
                raise subprocess.TimeoutExpired(argv, timeout_s) from None
            raise
        follower.join(timeout=10)
        stdout = container.logs(stdout=True, stderr=False).decode(errors="replace")
        stderr = container.logs(stdout=False, stderr=True).decode(errors="replace")
    except (docker.errors.APIError, requests.exceptions.RequestException) as exc:
        raise RunnerError(f"dataset container of {image} failed: {short_error(exc)}") from None
    finally:
        with contextlib.suppress(docker.errors.APIError, requests.exceptions.RequestException):
            container.remove(force=True, v=True)
    return DatasetResult(
        returncode=int(status.get("StatusCode", -1)), stdout=stdout, stderr_tail=tuple(stderr.splitlines()[-20:]),
        where=f"in {image}", mounts=seen,
    )


def _follow(chunks: Iterable[bytes], on_line: Callable[[str], None]) -> None:
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
