"""Dataset commands in a helper container of the workload's image.

A host with only the orchestrator installed (no torch, no nibabel) can then make and prepare
data: the workload's dataset command line runs where its seeds run, with what the image has.
Each host folder argument is bind-mounted at ``/mnt/mltrain/<n>`` (read-only unless the command
writes there); the container has no network, runs as the caller's uid:gid, carries mltrain's
labels (so `mltrain clean` finds one a killed orchestrator left), and is removed afterwards.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import docker
from docker.types import Mount

from orchestrator.runners.base import LABEL_WORKLOAD, Bundle, DatasetArg, DatasetResult, HostPath, host_text
from orchestrator.runners.docker.engine import run_container
from orchestrator.runners.gpus import device_order_env

MOUNT_BASE = "/mnt/mltrain"


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
    workload: Bundle,
    command: list[str],
    args: Sequence[DatasetArg],
    *,
    user: str,
    working_dir: str,
    timeout_s: float,
    on_line: Callable[[str], None],
) -> DatasetResult:
    """Run ``command + args`` in a fresh container of ``image``; stderr lines go to ``on_line``."""
    for arg in args:  # a bind mount's source must exist: a folder the command may write is made
        if isinstance(arg, HostPath) and arg.writable:
            arg.root.mkdir(parents=True, exist_ok=True)
    argv, mounts, seen = container_args(args)
    done = run_container(
        client, image, [*command, *argv], timeout_s=timeout_s, labels={LABEL_WORKLOAD: workload.name},
        on_stderr_line=lambda line: on_line(host_text(line, seen)), user=user, working_dir=working_dir,
        environment={"HOME": "/tmp", "PYTHONUNBUFFERED": "1", **device_order_env()}, mounts=mounts, init=True,
    )
    return DatasetResult(returncode=done.code, stdout=done.stdout, stderr_tail=tuple(done.stderr.splitlines()[-20:]),
                         where=f"in {image}", mounts=seen)
