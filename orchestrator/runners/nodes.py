"""A seed across nodes on Slurm: where rank, node and rendezvous live.

One seed is one Slurm job on N nodes. Its batch script (`body`) finds the first node's address,
sets the rendezvous there (RDZV_ENDPOINT host:port, a port free there, RDZV_ID the job
id), and ``srun`` starts one launcher per node (`orchestrator.runners.node_launch`), which prints the
node's facts and becomes the workload's run command with NODE_RANK set from SLURM_NODEID. The
workload's own launcher (workloads/common/launcher.sh) starts torchrun there with c10d rendezvous at
RDZV_ENDPOINT (the first node hosts it: ``is_host``), NPROC ranks per node; torchrun numbers the
ranks, and only global rank 0 prints MLLOG, so the job's one output holds one MLLOG log.

``srun --kill-on-bad-exit`` ends every node's launcher when one fails; the first ``srun: error:
NODE: task N: ...`` line names the node that failed (`failed_node`), and the seed's facts lines make
its `Placement` (`placement_of`).
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Sequence
from pathlib import Path

from pydantic import ValidationError

from orchestrator.results.records import NodeFacts, Placement
from orchestrator.runners.node_container import CONTAINER_LINE
from orchestrator.runners.node_launch import NODE_LINE

FREE_PORT = "import socket; s = socket.socket(); s.bind(('', 0)); print(s.getsockname()[1])"
"""The rendezvous port: one the first node's kernel says is free, asked on that node (the batch script
runs there). A port drawn from the job id collided where two clusters share hosts (the CI's, each
numbering its jobs from 1), and torchrun then joined the other job's rendezvous and waited."""
_LAUNCH_FAILED = re.compile(r"^srun: error: Task launch for \S+ failed on node (?P<node>[^\s:]+): (?P<what>.+)$",
                            re.MULTILINE)
RENDEZVOUS_TIMEOUT = "RendezvousTimeoutError"
"""What torchrun's traceback names when its nodes did not all join the rendezvous within its join timeout."""
_KILLED = {"Killed", "Terminated"}
"""How srun reports a task it ended itself (--kill-on-bad-exit), not one that ended on its own."""
_SRUN_ERROR = re.compile(r"^srun: error: (?P<node>[^\s:]+): tasks? (?P<task>[\d\-,]+): (?P<what>.+)$", re.MULTILINE)


def body(argv: list[str], *, nodes: int, processes: int, wrapper: Sequence[str] = (),
         after: Sequence[str] = ()) -> list[str]:
    """The lines of a batch script that start ``argv`` once per node (after its environment is exported),
    each node's launcher under ``wrapper`` (the job's `node_wrapper`); ``after``: a command run once per
    node when the launchers have ended, however they ended (what a launcher killed outright left there
    is removed), the job's exit status still theirs."""
    q = shlex.quote
    launch = (f"srun --kill-on-bad-exit=1 --nodes={nodes} --ntasks-per-node=1 "
              + " ".join(q(a) for a in [*wrapper, "python", "-m", "orchestrator.runners.node_launch", *argv]))
    if after:
        end = ["status=0", f"{launch} || status=$?",
               f"srun --nodes={nodes} --ntasks-per-node=1 --quiet " + " ".join(q(a) for a in after) + " || true",
               'exit "$status"']
    else:
        end = [f"exec {launch}"]
    return [
        f"export NNODES={nodes} NPROC={processes} RDZV_ID=\"$SLURM_JOB_ID\"",
        'rdzv_node=$(scontrol show hostnames "$SLURM_JOB_NODELIST")',
        'rdzv_node=${rdzv_node%%$\'\\n\'*}',
        'rdzv_addr=$(scontrol show node -o "$rdzv_node" | sed -n \'s/.*NodeAddr=\\([^ ]*\\).*/\\1/p\')',
        f'export RDZV_ENDPOINT="${{rdzv_addr:-$rdzv_node}}:$(python -c {shlex.quote(FREE_PORT)})"',
        *end,
    ]


def failed_node(text: str) -> tuple[str, str]:
    """(NAME, 'node NAME (...)') of the node that failed the job across nodes; ('', '') when none did.

    A node whose tasks could not be started (its slurmd down or not answering) is named by srun's
    launch error. After a rendezvous timed out, the nodes that did join fail first, on their own;
    the node at fault is one srun then had to kill (it never joined). Else the first task srun saw fail."""
    if launch := _LAUNCH_FAILED.search(text):
        return launch["node"], f"node {launch['node']} (its task could not be started: {launch['what'].strip()})"
    failed = list(_SRUN_ERROR.finditer(text))
    if not failed:
        return "", ""
    if RENDEZVOUS_TIMEOUT in text and (stuck := [f for f in failed if f["what"].strip() in _KILLED]):
        node = stuck[0]["node"]
        return node, f"node {node} (task {stuck[0]['task']}: did not join the rendezvous in time; the others gave up)"
    first = failed[0]
    return first["node"], f"node {first['node']} (task {first['task']}: {first['what'].strip()})"


def placement_of(log: Path) -> Placement | None:
    """The nodes a seed ran on, from the facts lines its launchers printed (None: none printed, or
    the lines do not make a placement: the seed did not run across nodes, or did not start)."""
    said: dict[int, dict[str, object]] = {}
    containers: dict[str, str] = {}
    try:
        with log.open(encoding="utf-8", errors="replace") as lines:
            for line in lines:
                if line.startswith(NODE_LINE):
                    fact = _json(line[len(NODE_LINE):])
                    if isinstance(fact.get("node_rank"), int):
                        said.setdefault(fact["node_rank"], fact)  # type: ignore[arg-type]
                elif line.startswith(CONTAINER_LINE):
                    ran = _json(line[len(CONTAINER_LINE):])
                    if isinstance(ran.get("node"), str) and isinstance(ran.get("container"), str):
                        containers.setdefault(ran["node"], ran["container"])  # type: ignore[arg-type]
    except OSError:
        return None
    if not said:
        return None
    try:
        nodes = tuple(NodeFacts.model_validate({k: v for k, v in said[rank].items() if k in NodeFacts.model_fields}
                                               | ({"container": ran} if (ran := containers.get(str(said[rank].get(
                                                   "name")))) else {}))
                      for rank in sorted(said))
    except ValidationError:
        return None
    first = said[min(said)]
    return Placement(nodes=nodes, world_size=sum(n.processes for n in nodes), backend=backend_of(first),
                     rendezvous=str(first.get("rendezvous", "")))


def _json(text: str) -> dict[str, object]:
    """A facts line's JSON object ({} for anything else)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def backend_of(fact: dict[str, object]) -> str:
    """NCCL where the ranks were given GPUs, gloo on CPUs (the workloads' rule: a CUDA device talks NCCL)."""
    return "nccl" if fact.get("gpus") else "gloo"
