"""On each node of a seed run across nodes (``srun`` starts one per node): say the node's facts in one
line, then become the workload's run command with the node's place in the job.

    python -m orchestrator.runners.node_launch RUN_COMMAND...

Slurm gives the node its name (SLURMD_NODENAME) and place (SLURM_NODEID); the batch script gives
NNODES, NPROC, RDZV_ENDPOINT and RDZV_ID (`orchestrator.runners.nodes`). The workload's launcher
(workloads/common/launcher.sh) reads them and starts torchrun with c10d rendezvous at RDZV_ENDPOINT.
The facts line is read back by `orchestrator.runners.nodes.placement_of`.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path

NODE_LINE = ":::MLTRAIN_NODE "
"""The start of a node's facts line in a seed's output."""
IB_CLASS = Path("/sys/class/infiniband")


def interfaces() -> dict[str, list[str]]:
    """Each network interface with an IPv4 address, and its addresses."""
    import psutil

    found: dict[str, list[str]] = {}
    for name, addresses in psutil.net_if_addrs().items():
        ipv4 = [a.address for a in addresses if a.family == socket.AF_INET]
        if ipv4:
            found[name] = ipv4
    return found


def ib_devices(root: Path = IB_CLASS) -> list[str]:
    """InfiniBand devices of this node (empty where it has none)."""
    try:
        return sorted(p.name for p in root.iterdir())
    except OSError:
        return []


def gpus(env: dict[str, str]) -> int:
    """The GPUs this node's ranks see: CUDA_VISIBLE_DEVICES as Slurm set it, else the node's device files."""
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return len([d for d in visible.split(",") if d.strip()])
    return len(list(Path("/dev").glob("nvidia[0-9]*")))


def facts(env: dict[str, str]) -> dict[str, object]:
    return {
        "name": env.get("SLURMD_NODENAME") or socket.gethostname(),
        "node_rank": int(env.get("SLURM_NODEID") or 0),
        "processes": int(env.get("NPROC") or 1),
        "gpus": gpus(env),
        "interfaces": interfaces(),
        "ib_devices": ib_devices(),
        "socket_ifname": env.get("NCCL_SOCKET_IFNAME") or env.get("GLOO_SOCKET_IFNAME"),
        "rendezvous": env.get("RDZV_ENDPOINT", ""),
        "nnodes": int(env.get("NNODES") or 1),
    }


def main(argv: list[str]) -> int:
    if not argv:
        sys.stderr.write("usage: python -m orchestrator.runners.node_launch RUN_COMMAND...\n")
        return 2
    env = dict(os.environ)
    said = facts(env)
    env["NODE_RANK"] = str(said["node_rank"])
    sys.stdout.write(NODE_LINE + json.dumps(said, sort_keys=True) + "\n")
    sys.stdout.flush()
    try:
        os.execvpe(argv[0], argv, env)
    except OSError as exc:
        sys.stderr.write(f"node_launch: cannot run {argv[0]}: {exc.strerror}\n")
    return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
