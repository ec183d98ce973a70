"""One node's telemetry while a batch system runs a seed there (Slurm), sampled on the node itself.

    python -m orchestrator.insight.node_telemetry FOLDER -- LAUNCHER...

Slurm starts this as the seed's task on each node (`runners.slurm.batch_script`, given it by the
session as the job's node wrapper). It samples the node as mltrain samples a local seed's host
(`telemetry.TelemetrySampler`: CPU, steal, other processes, memory pressure, the node's GPUs that
Slurm gave the job), runs the launcher as its child, and when the launcher ends writes the series to
FOLDER/<node>.json (`node_series`) and exits as the launcher did. It is the task Slurm waits for,
so the series is whole before the step ends.

The seed's own processes on a node are this process's tree and every process carrying the run's mark
(`runners.proc.MARK_ENV`, which the batch script exports): where nodes share one host (the CI's
cluster), each node's ranks are the seed's too, never another's work. Anything else is, and
`quiet.node_evidence` judges each node's series (`quiet.judge_nodes` makes the seed's verdict of them)
and the seed's energy is the sum of theirs (`telemetry_summary.energy_to_train`).
A stop signal is passed on to the launcher; its end is still awaited and the series written.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import sys
from pathlib import Path
from types import FrameType

from orchestrator.insight.telemetry import TelemetrySampler
from orchestrator.results import atomic
from orchestrator.runners import proc

_NODE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)
"""What the batch system may send the task, passed on to the launcher."""


def node_series(folder: Path, node: str) -> Path:
    """Where node ``node``'s series of a seed is kept (a name that is no plain file name is refused)."""
    if not _NODE_NAME.match(node) or len(node) > 200:
        raise ValueError(f"node name {node!r} cannot name a file")
    return folder / f"{node}.json"


def visible_gpus(env: dict[str, str]) -> tuple[str, ...] | None:
    """The GPUs Slurm gave the task (CUDA_VISIBLE_DEVICES; None: not set, every GPU of the node)."""
    visible = env.get("CUDA_VISIBLE_DEVICES")
    return None if visible is None else tuple(d.strip() for d in visible.split(",") if d.strip())


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        sys.stderr.write("usage: python -m orchestrator.insight.node_telemetry FOLDER -- LAUNCHER...\n")
        return 2
    folder, command, env = Path(argv[0]), argv[2:], dict(os.environ)
    node = env.get("SLURMD_NODENAME") or socket.gethostname()
    sampler: TelemetrySampler | None = None
    try:
        atomic.make_folder(folder)
        sampler = TelemetrySampler(node_series(folder, node), Path(env.get("DATADIR") or "."),
                                   gpus=visible_gpus(env), mark=env.get(proc.MARK_ENV) or None)
        sampler.start()
    except Exception as exc:  # noqa: BLE001 - telemetry never keeps a seed from running
        sys.stderr.write(f"node_telemetry: node {node} is not sampled: {type(exc).__name__}: {exc}\n")
        sampler = None
    child = proc.inheriting(command, env=env)

    def forward(signum: int, _frame: FrameType | None) -> None:
        child.send_signal(signum)

    for sig in FORWARDED:
        signal.signal(sig, forward)
    code = child.wait()
    if sampler is not None:
        try:
            sampler.stop()
        except Exception as exc:  # noqa: BLE001
            sys.stderr.write(f"node_telemetry: node {node}'s series not written: {type(exc).__name__}: {exc}\n")
    if code < 0:  # ended by a signal: end so too, as srun would have seen the launcher end
        if -code not in (signal.SIGKILL, signal.SIGSTOP):  # their handlers cannot be set (EINVAL)
            signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
