"""On each node of a seed under ``--runner slurm-docker``: the node's launcher in a container of the
workload's image, on the node's own Docker engine.

    python -m orchestrator.runners.node_container SPEC.json       # the seed's part on this node
    python -m orchestrator.runners.node_container --has-image TAG  # whether this node's engine holds TAG
    python -m orchestrator.runners.node_container --remove SPEC.json  # after the launchers, whatever ended them

srun starts `orchestrator.runners.node_launch` once per node (the node's facts line, NODE_RANK), which
becomes the first form. The spec (`NodeContainer`, written into the seed's folder by
`orchestrator.runners.slurm_docker`) says everything but the node's place in the job: that (NNODES,
NPROC, NODE_RANK, RDZV_ENDPOINT, RDZV_ID) is read here from the task's environment and handed to the
container, which runs on the host's network, so that torchrun's c10d rendezvous and the ranks'
gloo or NCCL reach the other nodes as they would without a container, and in the host's process
namespace: torchrun names each node in its rendezvous by host name and PID, and with the host's
network every container has its host's name, while in namespaces of their own two containers'
launchers have the same PID (seen where two nodes share a host: the rendezvous then waited for a
second node forever).

The container is named for its run, seed and node (``mltrain-<run>-seed<n>-<node>``) and carries the
job's marks and the node as labels; it runs as the submitting user (what it writes into /results is
theirs). It is removed when it ends and when this launcher is stopped (scancel, the wall-clock limit,
srun's --kill-on-bad-exit after another node failed: each a SIGTERM), so whatever ends the seed, no
container of it stays on the node. A launcher killed outright (SIGKILL, the OOM killer) cannot remove
its container: the batch script then runs ``--remove`` on every node of the job once the launchers
have ended (`orchestrator.runners.nodes.body`'s ``after``), and one of the same name an earlier
attempt left is removed before the new one starts.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
from pathlib import Path

from pydantic import BaseModel, ConfigDict

LABEL_NODE = "mltrain.node"
CONTAINER_LINE = ":::MLTRAIN_CONTAINER "
"""The start of the line each node says its container in (JSON: node, container: the image's tag@id),
read back into the seed's `Placement` (`orchestrator.runners.nodes.placement_of`)."""
IMAGE_LINE = ":::MLTRAIN_IMAGE "
"""The start of a node's answer to ``--has-image`` (JSON: node, image, present, error)."""
NODE_ENGINE_ENV = "MLTRAIN_NODE_DOCKER_HOST"
"""The nodes' engine where it is not at DOCKER_HOST (mltrain builds on a remote engine): ``{node}``
stands for the node's name (``tcp://{node}:2376``, ``unix:///run/docker-{node}.sock``)."""
PLACE_ENV = ("NNODES", "NPROC", "NODE_RANK", "RDZV_ENDPOINT", "RDZV_ID")
"""The node's place in the job, from the batch script and node_launch (`orchestrator.runners.nodes`)."""


class NodeContainer(BaseModel):
    """The container every node of one Slurm job starts, as the submitting host decided it."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    image: str
    name: str
    """The job's container name; each node's is this and the node's name."""
    argv: tuple[str, ...]
    """The workload's command and its arguments, as the container sees its files."""
    env: dict[str, str]
    labels: dict[str, str]
    user: str
    """uid:gid of the submitting user."""
    data_dir: str
    """The dataset (shared file system), read-only at /data."""
    results_dir: str
    """The seed's results folder (shared file system), at /results."""
    working_dir: str
    ipc: str
    shm_size: str
    ulimits: dict[str, int]
    gpus: bool
    """Hand the container the GPUs Slurm gave the task (its CUDA_VISIBLE_DEVICES)."""


def node_name(env: dict[str, str]) -> str:
    return env.get("SLURMD_NODENAME") or socket.gethostname()


def container_of(spec: NodeContainer, node: str) -> str:
    """The container's name on ``node``, in the characters Docker takes."""
    from orchestrator.runners.docker.runner import docker_name

    return docker_name(f"{spec.name}-{node}")


def _connect(node: str):  # noqa: ANN202 - docker's client, imported late (the spec's readers need no SDK)
    from orchestrator.runners.docker.engine import connect

    if address := os.environ.get(NODE_ENGINE_ENV):
        os.environ["DOCKER_HOST"] = address.replace("{node}", node)
    return connect()


def has_image(tag: str) -> int:
    """Say in one line whether this node's engine holds ``tag``; 0 either way (the line is the answer)."""
    node = node_name(dict(os.environ))
    said: dict[str, object] = {"node": node, "image": tag, "present": False, "error": ""}
    try:
        from orchestrator.runners.docker.images import image_present

        said["present"] = image_present(_connect(node), tag)
    except Exception as exc:  # noqa: BLE001 - any failure is this node's answer, said in its line
        said["error"] = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    sys.stdout.write(IMAGE_LINE + json.dumps(said, sort_keys=True) + "\n")
    return 0


def run(spec: NodeContainer) -> int:
    """Run the spec's container on this node to its end (its exit status), removed whatever ends it."""
    import docker.errors
    from docker.types import DeviceRequest, Mount, Ulimit

    from orchestrator.runners.docker.engine import short_error
    from orchestrator.runners.docker.runner import CONTAINER_DATA, CONTAINER_RESULTS
    from orchestrator.signals import Stop, stop_on_signals

    env = dict(os.environ)
    node = node_name(env)
    name = container_of(spec, node)
    visible = [d.strip() for d in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    with stop_on_signals():
        try:
            client = _connect(node)
            with contextlib.suppress(docker.errors.NotFound):
                client.containers.get(name).remove(force=True, v=True)  # an earlier attempt's, its launcher killed
            container = client.containers.create(
                image=spec.image, entrypoint=list(spec.argv), command=[], name=name,
                labels={**spec.labels, LABEL_NODE: node},
                environment={**spec.env, **{k: env[k] for k in PLACE_ENV if k in env}},
                working_dir=spec.working_dir, user=spec.user,
                mounts=[Mount(CONTAINER_DATA, spec.data_dir, type="bind", read_only=True),
                        Mount(CONTAINER_RESULTS, spec.results_dir, type="bind")],
                network_mode="host", pid_mode="host", ipc_mode=spec.ipc, shm_size=spec.shm_size,
                ulimits=[Ulimit(name=k, soft=v, hard=v) for k, v in spec.ulimits.items()],
                device_requests=[DeviceRequest(device_ids=visible, capabilities=[["gpu"]])]
                if spec.gpus and visible else [],
                init=True, detach=True,
            )
        except Stop as stop:
            return stop.exit_code
        except Exception as exc:  # noqa: BLE001 - the node's one line, then srun names the node
            sys.stderr.write(f"node_container: node {node} cannot create container {name} of {spec.image}:"
                             f" {short_error(exc)}\n")
            return 125
        try:
            said = {"node": node, "name": name, "container": f"{spec.image}@{container.image.id}"}
            sys.stdout.write(CONTAINER_LINE + json.dumps(said, sort_keys=True) + "\n")
            sys.stdout.flush()
            container.start()
            for chunk in container.logs(stream=True, follow=True, stdout=True, stderr=True):
                sys.stdout.buffer.write(chunk)
                sys.stdout.buffer.flush()
            return int(container.wait().get("StatusCode", 125))
        except Stop as stop:
            return stop.exit_code
        except Exception as exc:  # noqa: BLE001
            sys.stderr.write(f"node_container: node {node} lost container {name}: {short_error(exc)}\n")
            return 125
        finally:
            with contextlib.suppress(Exception):
                container.remove(force=True, v=True)


def remove(spec: NodeContainer) -> int:
    """Remove this node's container of the spec, if any is left (its launcher was killed outright:
    SIGKILL, the OOM killer); said in one line."""
    import docker.errors

    node = node_name(dict(os.environ))
    name = container_of(spec, node)
    try:
        client = _connect(node)
        client.containers.get(name).remove(force=True, v=True)
    except docker.errors.NotFound:
        return 0
    except Exception as exc:  # noqa: BLE001 - said, and the job's status stays its launchers'
        sys.stderr.write(f"node_container: node {node} could not remove container {name}: {exc}\n")
        return 1
    sys.stderr.write(f"node_container: node {node}: removed container {name}, which its launcher left\n")
    return 0


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "--has-image":
        return has_image(argv[1])
    if len(argv) not in (1, 2) or (len(argv) == 2 and argv[0] != "--remove"):
        sys.stderr.write("usage: python -m orchestrator.runners.node_container [--remove] SPEC.json"
                         " | --has-image TAG\n")
        return 2
    from orchestrator.config.reading import read_json

    spec = NodeContainer.model_validate(read_json(Path(argv[-1])))
    return remove(spec) if argv[0] == "--remove" else run(spec)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
