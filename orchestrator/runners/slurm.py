"""Run jobs as Slurm batch jobs (one per seed or step), in the manner of submitit's Slurm executor.

The batch script is written in the job's folder; the job's output file is streamed as it grows; the
exit comes from ``scontrol`` (or ``sacct -c`` once the controller has forgotten the job). Each job's
comment carries its marks (its run id among them), by which `stop_leftovers` finds a run's jobs.

No value reaches a batch script unchecked. ``shlex.quote`` protects a value in the script's body,
but not in an ``#SBATCH`` line: sbatch reads those itself, up to a newline, splitting at spaces
and stopping at ``#``. So every value is refused if it holds a control character (a newline would
end the header and run the rest as shell), and an ``#SBATCH`` value is also refused if sbatch
would read it differently (spaces, quotes, backslashes, ``#``; ``%`` in the output file's name)
or if it breaks Slurm's naming rules (partitions and job names are letters, digits, ``_.-``).
The checks run before any script is written (`SlurmRunner.check_job`, through `batch_script`).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.errors import RunnerError, UsageError
from orchestrator.results import atomic
from orchestrator.results.records import Exit
from orchestrator.runners import node_container, nodes, proc
from orchestrator.runners.base import LABEL_RUN_ID, Bundle, DatasetArg, DatasetResult, Job, JobSpec, Runner, host_argv
from orchestrator.runners.gpus import CUDA_VISIBLE_DEVICES, device_order_env
from orchestrator.runners.outcome import read_tail

POLL_S = 0.5
COMMAND_TIMEOUT_S = 60.0
TERMINAL_STATES = {
    "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL",
    "DEADLINE",
}
COMPLETING_GRACE_S = 10.0
"""A job whose script has ended while one of its nodes has not confirmed the end (COMPLETING: that
node's slurmd is down or does not answer) is taken as ended this long after, its end read from its
exit code: a node lost never holds a seed beyond it."""
_ENDED_BY = {"CANCELLED": 15, "TIMEOUT": 15, "DEADLINE": 15, "PREEMPTED": 15, "NODE_FAIL": 9, "BOOT_FAIL": 9}
"""Terminal states in which something outside the job ended it, and the signal that stands for it."""
_WHY = {"NODE_FAIL": "the node was lost", "BOOT_FAIL": "the node failed to boot", "PREEMPTED": "preempted",
        "TIMEOUT": "Slurm's own time limit", "DEADLINE": "Slurm's deadline"}
_GPUS = re.compile(r"^(none|[1-9]\d*)$")
_NODELIST = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._\-\[\],]*$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_SBATCH_UNSAFE = re.compile(r"[\s'\"\\#]")
_SLURM_NAME = r"[A-Za-z0-9_.-]+"
_PARTITIONS = re.compile(rf"^{_SLURM_NAME}(,{_SLURM_NAME})*$")
_JOB_NAME = re.compile(rf"^{_SLURM_NAME}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_FIX = "; choose one without it"


def no_control_characters(what: str, value: str) -> str:
    """A value bound for a batch script holds no control character (a newline would end its line)."""
    if _CONTROL.search(value):
        raise UsageError(f"{what} {value!r} has a control character, which cannot go into a Slurm batch script{_FIX}")
    return value


def sbatch_value(what: str, value: str, *, name: re.Pattern[str] | None = None, unsafe: str = "") -> str:
    """A value for an ``#SBATCH`` line, refused unless sbatch reads it back exactly as given (and,
    with ``name``, unless it is a name by Slurm's rules)."""
    no_control_characters(what, value)
    bad = sorted(set(_SBATCH_UNSAFE.findall(value)) | {c for c in unsafe if c in value})
    if bad:
        shown = " ".join(repr(c) for c in bad)
        raise UsageError(f"{what} {value!r} holds {shown}, which sbatch does not read back from an #SBATCH line{_FIX}")
    if name is not None and not name.match(value):
        raise UsageError(f"{what} {value!r} is not a Slurm name (letters, digits, '_', '.', '-')")
    return value


def job_name(spec: JobSpec) -> str:
    """The name of a job in ``squeue``: its run and its name in the run."""
    return f"mltrain-{spec.run_id}-{spec.name}"


def comment(marks: dict[str, str]) -> str:
    """A job's marks as its Slurm comment (``key=value;...``, sorted); read back by `marks_of`."""
    return ";".join(f"{k}={v}" for k, v in sorted(marks.items()))


def marks_of(text: str) -> dict[str, str]:
    """The marks a Slurm comment written by `comment` holds ({} for any other comment)."""
    pairs = [item.partition("=") for item in text.split(";")]
    return {key: value for key, sep, value in pairs if sep}


@dataclass(frozen=True, kw_only=True)
class SlurmOptions:
    partition: str | None = None
    """Partition to submit to, or a comma-separated list of them (None: the cluster's default)."""
    gpus: str | None = None
    """GPUs per job: a count (requested as --gres=gpu:N; Slurm sets CUDA_VISIBLE_DEVICES to the
    ones it allocates), none (CUDA_VISIBLE_DEVICES empty: no GPU, allocated or not), or None
    (not given: nothing requested, nothing hidden)."""
    time_limit_minutes: float = 1440
    """Slurm's own limit; set above the profile's wall-clock limit so that mltrain's fires first."""
    nodelist: str | None = None
    """Run on these nodes (Slurm's hostlist syntax, node[01-04]); qualification pins one job per node."""
    exclusive: bool = False
    """Nothing else runs on the node meanwhile (a node is qualified alone)."""
    nodes: int = 1
    """Nodes of one job: above 1, one launcher per node through srun, torchrun's rendezvous on the
    first (`orchestrator.runners.nodes`)."""
    gpus_per_node: int | None = None
    """GPUs requested on each node of a job across nodes, one rank per GPU (None: none requested, one rank)."""

    def __post_init__(self) -> None:
        if isinstance(self.nodes, bool) or not isinstance(self.nodes, int) or self.nodes < 1:
            raise UsageError(f"--nodes {self.nodes!r}: give the nodes of one seed, a whole number >= 1")
        if self.gpus_per_node is not None and (isinstance(self.gpus_per_node, bool) or self.gpus_per_node < 1):
            raise UsageError(f"--gpus-per-node {self.gpus_per_node!r}: give a whole number >= 1")
        if self.gpus_per_node is not None and self.gpus is not None:
            raise UsageError("--gpus and --gpus-per-node both given: give one (--gpus-per-node with --nodes)")
        if self.gpus is not None and not _GPUS.match(self.gpus):
            raise UsageError(f"--gpus {self.gpus!r}: the slurm runner takes none or a GPU count per job")
        if self.nodelist is not None and not _NODELIST.match(self.nodelist):
            raise UsageError(f"node list {self.nodelist!r}: use Slurm host names or ranges such as node[01-04]")
        if self.partition is not None:
            sbatch_value("--partition", self.partition, name=_PARTITIONS)


def batch_script(job: JobSpec, options: SlurmOptions, *, project_root: Path, output: Path,
                 container: Path | None = None) -> str:
    """The sbatch script of one job. ``#SBATCH`` values are checked to read back as given; values
    in the body are shell-quoted; no value holds a control character (UsageError naming it).
    ``container``: each node's launcher runs the container this file describes
    (`orchestrator.runners.node_container`), on one node too, in place of the job's command."""
    q = shlex.quote
    lines = [
        "#!/bin/bash",
        f"#SBATCH --job-name={sbatch_value('the job name', job_name(job), name=_JOB_NAME)}",
        f"#SBATCH --output={sbatch_value('the job folder', str(output), unsafe='%')}",
        f"#SBATCH --chdir={sbatch_value('the workload folder', str(job.bundle.folder))}",
        f"#SBATCH --time={max(1, int(options.time_limit_minutes + 0.999))}",
        f"#SBATCH --nodes={options.nodes}",
        "#SBATCH --ntasks-per-node=1" if options.nodes > 1 else "#SBATCH --ntasks=1",
        f"#SBATCH --comment={sbatch_value('the job comment', comment(job.marks()))}",
    ]
    if options.partition:
        lines.append(f"#SBATCH --partition={sbatch_value('--partition', options.partition, name=_PARTITIONS)}")
    if options.gpus not in (None, "none"):
        lines.append(f"#SBATCH --gres=gpu:{options.gpus}")
    if options.gpus_per_node is not None:
        lines.append(f"#SBATCH --gres=gpu:{options.gpus_per_node}")
    if options.nodelist:
        lines.append(f"#SBATCH --nodelist={sbatch_value('the node list', options.nodelist)}")
    if options.exclusive:
        lines.append("#SBATCH --exclusive")
    env = {
        **device_order_env(),
        **job.env,
        "DATADIR": str(job.data_dir),
        "RESULTS_DIR": str(job.results_dir),
        "PYTHONPATH": str(project_root),
        proc.MARK_ENV: job.run_id,  # each node tells the seed's processes from others' by it (telemetry)
        **({CUDA_VISIBLE_DEVICES: ""} if options.gpus == "none" else {}),
    }
    lines.append("set -euo pipefail")
    python_bin = no_control_characters("the Python folder", str(Path(sys.executable).parent))
    lines.append(f'export PATH={q(python_bin)}:"$PATH"')
    for key, value in sorted(env.items()):
        if not _ENV_NAME.match(key):
            raise UsageError(f"environment variable {key!r} of the profile is not a shell variable name"
                             " (letters, digits, '_')")
        lines.append(f"export {key}={q(no_control_characters(f'environment variable {key}', value))}")
    after: list[str] = []
    if container is None:
        argv = [no_control_characters("the workload's run command", a) for a in proc.resolve_argv(job.argv())]
    else:
        argv = ["python", "-m", node_container.__name__, no_control_characters("the job folder", str(container))]
        after = ["python", "-m", node_container.__name__, "--remove", argv[-1]]
    wrapper = [no_control_characters("the node's wrapper", a) for a in job.node_wrapper]
    if options.nodes > 1 or container is not None:
        lines += nodes.body(argv, nodes=options.nodes, processes=options.gpus_per_node or 1, wrapper=wrapper,
                            after=after)
    else:
        lines.append("exec " + " ".join(q(a) for a in [*wrapper, *argv]))
    return "\n".join(lines) + "\n"


def _slurm(args: list[str]) -> subprocess.CompletedProcess[str]:
    try:
        return proc.run(args, cwd=Path.cwd(), env=proc.child_env({}), timeout_s=COMMAND_TIMEOUT_S)
    except (FileNotFoundError, proc.ProgramNotFound):  # a tool missing: the infrastructure's fault (exit 3)
        raise RunnerError(f"{args[0]} not found: is this a Slurm login node?") from None
    except subprocess.TimeoutExpired:
        raise RunnerError(f"{args[0]} did not answer within {COMMAND_TIMEOUT_S:.0f} s") from None


def _last_line(result: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in (result.stderr or result.stdout or "").splitlines() if line.strip()]
    return lines[-1].strip() if lines else f"exit status {result.returncode}"


def node_names(partition: str | None = None, hostlist: str | None = None) -> list[str]:
    """The cluster's nodes (of one partition), or the names a hostlist (node[01-04]) expands to."""
    if hostlist is not None:
        result = _slurm(["scontrol", "show", "hostnames", hostlist])
    else:
        result = _slurm(["sinfo", "-N", "-h", "-o", "%N", *(["-p", partition] if partition else [])])
    if result.returncode != 0:
        raise RunnerError(f"cannot list Slurm nodes: {_last_line(result)}")
    return sorted(set(result.stdout.split()))


def node_address(node: str) -> str:
    """Where another node reaches ``node`` (its ``NodeAddr``; its name where Slurm gives none)."""
    result = _slurm(["scontrol", "show", "node", "-o", node])
    if result.returncode != 0:
        raise RunnerError(f"cannot read node {node} from Slurm: {_last_line(result)}")
    found = re.search(r"\bNodeAddr=(\S+)", result.stdout)
    return found.group(1) if found else node


def node_gpus(node: str) -> int:
    """The GPUs Slurm knows node ``node`` to have (the sum of its ``gpu`` generic resources: ``Gres=gpu:8``,
    ``gpu:h100:8(S:0-1)``, ``gpu:a100:4,gpu:h100:4``); 0 for a node without any."""
    result = _slurm(["scontrol", "show", "node", "-o", node])
    if result.returncode != 0:
        raise RunnerError(f"cannot read node {node} from Slurm: {_last_line(result)}")
    found = re.search(r"\bGres=(\S+)", result.stdout)
    total = 0
    for entry in (found.group(1) if found else "").split(","):
        fields = re.sub(r"\(.*?\)", "", entry).split(":")
        if fields[0] == "gpu" and fields[-1].isdigit():
            total += int(fields[-1])
    return total


def job_state(job_id: str) -> tuple[str, str] | None:
    """(state, exit code 'N:S') of a job, or None when Slurm does not know it (yet)."""
    result = _slurm(["scontrol", "show", "job", "-o", job_id])
    if result.returncode == 0:
        state = re.search(r"\bJobState=(\S+)", result.stdout)
        code = re.search(r"\bExitCode=(\d+:\d+)", result.stdout)
        if state:
            return state.group(1), code.group(1) if code else "0:0"
    result = _slurm(["sacct", "-c", "-j", job_id, "-n", "-P", "-o", "JobID,State,ExitCode"])
    for line in result.stdout.splitlines():
        fields = line.split("|")
        if len(fields) == 3 and fields[0] == job_id:
            return fields[1].split()[0], fields[2]
    return None


class SlurmJob(Job):
    def __init__(self, job_id: str, output: Path) -> None:
        self.job_id = job_id
        self.output = output
        self._final: tuple[str, str] | None = None
        self._completing: float | None = None
        """When the job was first seen COMPLETING."""

    def _finished(self) -> bool:
        if self._final is None:
            state = job_state(self.job_id)
            if state is not None and state[0] in TERMINAL_STATES:
                self._final = state
            elif state is not None and state[0] == "COMPLETING":
                self._completing = self._completing or time.monotonic()
                if time.monotonic() - self._completing >= COMPLETING_GRACE_S:
                    self._final = ("COMPLETED" if state[1] == "0:0" else "FAILED", state[1])
        return self._final is not None

    def stream(self) -> Iterator[bytes]:
        offset = 0
        while True:
            done = self._finished()  # decide before reading, so the last bytes are not missed
            if self.output.exists():
                with self.output.open("rb") as handle:
                    handle.seek(offset)
                    while chunk := handle.read(65536):
                        offset += len(chunk)
                        yield chunk
            if done:
                return
            time.sleep(POLL_S)

    def wait(self) -> Exit:
        while not self._finished():
            time.sleep(POLL_S)
        assert self._final is not None
        state, code = self._final
        status, _, signal = code.partition(":")
        exit_code = -int(signal) if signal and int(signal) else int(status or 0)
        if exit_code == 0 and state in _ENDED_BY:
            exit_code = -_ENDED_BY[state]  # ended from outside: a kill, whatever the job's own status
        why = _WHY.get(state, "")
        node, failed = nodes.failed_node(read_tail(self.output)) if state != "COMPLETED" else ("", "")
        if failed:
            why = f"{why + '; ' if why else ''}{failed} failed first"
        detail = f"slurm job {self.job_id} {state}{': ' + why if why else ''}" if state != "COMPLETED" else ""
        return Exit(code=exit_code, oom_killed=state == "OUT_OF_MEMORY", detail=detail, failed_node=node)

    def cancel(self) -> None:
        _slurm(["scancel", self.job_id])
        deadline = time.monotonic() + 60
        while not self._finished() and time.monotonic() < deadline:
            time.sleep(POLL_S)


class SlurmRunner(Runner):
    """One sbatch job per job on the cluster this host submits to."""

    name = "slurm"
    sampled_gpus: tuple[str, ...] | None = ()  # the jobs' GPUs are on a node, not on this host

    def __init__(self, project_root: Path, options: SlurmOptions) -> None:
        self.project_root = project_root
        self.options = options

    def prepare(self, bundle: Bundle) -> dict[str, Any]:
        info = _slurm(["sinfo", "-h", "-o", "%P|%a|%D|%T"])
        if info.returncode != 0:
            raise RunnerError(f"no Slurm controller answers: {_last_line(info)}")
        version = _slurm(["sbatch", "--version"]).stdout.strip()
        return {"runner": "slurm", "slurm": version, "partitions": info.stdout.split(),
                "partition": self.options.partition, "gpus_per_job": self.options.gpus,
                **({"nodes": self.options.nodes, "gpus_per_node": self.options.gpus_per_node}
                   if self.options.nodes > 1 else {})}

    def _script(self, job: JobSpec) -> str:
        return batch_script(job, self.options, project_root=self.project_root, output=job.paths.slurm_output)

    def check_job(self, spec: JobSpec) -> None:
        self._script(spec)  # the script is made, and refused, exactly as submit would make it

    def submit(self, spec: JobSpec) -> SlurmJob:
        paths = spec.paths
        atomic.write_text(paths.slurm_script, self._script(spec))
        paths.slurm_output.unlink(missing_ok=True)  # an earlier attempt's output is archived, never streamed
        result = _slurm(["sbatch", "--parsable", str(paths.slurm_script)])
        if result.returncode != 0:
            raise RunnerError(f"sbatch refused job {spec.name}: {_last_line(result)}")
        return SlurmJob(result.stdout.strip().split(";")[0], paths.slurm_output)

    def stop_leftovers(self, run_id: str) -> list[str]:
        """Every job of this user whose comment marks it as run ``run_id``'s, cancelled."""
        listed = _slurm(["squeue", "--me", "-h", "-o", "%i|%k"])
        if listed.returncode != 0:
            raise RunnerError(f"squeue cannot list the jobs of run {run_id}: {_last_line(listed)}")
        found = [line.partition("|") for line in listed.stdout.splitlines()]
        jobs = [SlurmJob(job_id.strip(), Path(os.devnull)) for job_id, _, text in found
                if marks_of(text.strip()).get(LABEL_RUN_ID) == run_id]
        for job in jobs:
            job.cancel()
        return [f"slurm job {job.job_id}" for job in jobs]

    def dataset_command(
        self, bundle: Bundle, args: Sequence[DatasetArg], *, timeout_s: float, on_line: Callable[[str], None],
    ) -> DatasetResult:
        """On a node, through ``srun`` (blocking, output relayed); paths are the shared filesystem's."""
        argv = ["srun", "--nodes=1", "--ntasks=1", f"--job-name=mltrain-data-{bundle.name}",
                f"--time={max(1, int(timeout_s / 60 + 0.999))}", f"--chdir={bundle.folder}", "--quiet"]
        if self.options.partition:
            argv.append(f"--partition={self.options.partition}")
        argv += proc.resolve_argv([*bundle.data.cli, *host_argv(args)])
        env = proc.child_env(device_order_env(), pythonpath=self.project_root)  # srun passes it to the node
        try:
            result = proc.run_streaming(argv, cwd=Path.cwd(), env=env, timeout_s=timeout_s, on_line=on_line)
        except FileNotFoundError:
            raise RunnerError("srun not found: is this a Slurm login node?") from None
        return DatasetResult.of(result, "on a Slurm node")
