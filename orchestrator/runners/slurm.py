"""Run seeds as Slurm batch jobs (one job per seed), in the manner of submitit's Slurm executor.

The batch script is written next to the seed's results; the job's output file is streamed as it
grows; the exit comes from ``scontrol`` (or ``sacct -c`` once the controller has forgotten the job).
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.config.workloads import Workload
from orchestrator.errors import RunnerError, UsageError
from orchestrator.results.records import Exit
from orchestrator.runners import proc
from orchestrator.runners.base import DatasetArg, DatasetResult, Job, Runner, SeedJob, host_argv
from orchestrator.runners.gpus import CUDA_VISIBLE_DEVICES

POLL_S = 0.5
COMMAND_TIMEOUT_S = 60.0
TERMINAL_STATES = {
    "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL",
    "DEADLINE",
}
_GPUS = re.compile(r"^(none|[1-9]\d*)$")


@dataclass(frozen=True, kw_only=True)
class SlurmOptions:
    partition: str | None = None
    """Partition to submit to (None: the cluster's default)."""
    gpus: str | None = None
    """GPUs per job: a count (requested as --gres=gpu:N; Slurm sets CUDA_VISIBLE_DEVICES to the
    ones it allocates), none (CUDA_VISIBLE_DEVICES empty: no GPU, allocated or not), or None
    (not given: nothing requested, nothing hidden)."""
    time_limit_minutes: float = 1440
    """Slurm's own limit; set above the profile's wall-clock limit so that mltrain's fires first."""

    def __post_init__(self) -> None:
        if self.gpus is not None and not _GPUS.match(self.gpus):
            raise UsageError(f"--gpus {self.gpus!r}: the slurm runner takes none or a GPU count per job")


def batch_script(job: SeedJob, options: SlurmOptions, *, project_root: Path, output: Path) -> str:
    """The sbatch script of one seed. Every value is shell-quoted; nothing is interpolated raw."""
    q = shlex.quote
    lines = [
        "#!/bin/bash",
        f"#SBATCH --job-name={q(f'mltrain-{job.workload.name}-{job.seed}')}",
        f"#SBATCH --output={q(str(output))}",
        f"#SBATCH --chdir={q(str(job.workload.folder))}",
        f"#SBATCH --time={max(1, int(options.time_limit_minutes + 0.999))}",
        "#SBATCH --nodes=1",
        "#SBATCH --ntasks=1",
        f"#SBATCH --comment={q(';'.join(f'{k}={v}' for k, v in sorted(job.labels.items())))}",
    ]
    if options.partition:
        lines.append(f"#SBATCH --partition={q(options.partition)}")
    if options.gpus not in (None, "none"):
        lines.append(f"#SBATCH --gres=gpu:{options.gpus}")
    env = {
        **job.env,
        "DATADIR": str(job.data_dir),
        "RESULTS_DIR": str(job.results_dir),
        "PYTHONPATH": str(project_root),
        **({CUDA_VISIBLE_DEVICES: ""} if options.gpus == "none" else {}),
    }
    lines.append("set -euo pipefail")
    lines.append(f'export PATH={q(str(Path(sys.executable).parent))}:"$PATH"')
    lines.extend(f"export {key}={q(value)}" for key, value in sorted(env.items()))
    argv = proc.resolve_argv([*job.workload.run, str(job.seed)])
    lines.append("exec " + " ".join(q(a) for a in argv))
    return "\n".join(lines) + "\n"


def _slurm(args: list[str]) -> subprocess.CompletedProcess[str]:
    try:
        return proc.run(args, cwd=Path.cwd(), env=proc.child_env({}), timeout_s=COMMAND_TIMEOUT_S)
    except FileNotFoundError:
        raise RunnerError(f"{args[0]} not found: is this a Slurm login node?") from None
    except subprocess.TimeoutExpired:
        raise RunnerError(f"{args[0]} did not answer within {COMMAND_TIMEOUT_S:.0f} s") from None


def _last_line(result: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in (result.stderr or result.stdout or "").splitlines() if line.strip()]
    return lines[-1].strip() if lines else f"exit status {result.returncode}"


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

    def _finished(self) -> bool:
        if self._final is None:
            state = job_state(self.job_id)
            if state is not None and state[0] in TERMINAL_STATES:
                self._final = state
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
        if state == "CANCELLED" and exit_code == 0:
            exit_code = -15
        detail = f"slurm job {self.job_id} {state}" if state != "COMPLETED" else ""
        return Exit(code=exit_code, oom_killed=state == "OUT_OF_MEMORY", detail=detail)

    def cancel(self) -> None:
        _slurm(["scancel", self.job_id])
        deadline = time.monotonic() + 60
        while not self._finished() and time.monotonic() < deadline:
            time.sleep(POLL_S)


class SlurmRunner(Runner):
    """One sbatch job per seed on the cluster this host submits to."""

    name = "slurm"
    sampled_gpus: tuple[str, ...] | None = ()  # the jobs' GPUs are on a node, not on this host

    def __init__(self, project_root: Path, options: SlurmOptions) -> None:
        self.project_root = project_root
        self.options = options

    def prepare(self, workload: Workload) -> dict[str, Any]:
        info = _slurm(["sinfo", "-h", "-o", "%P|%a|%D|%T"])
        if info.returncode != 0:
            raise RunnerError(f"no Slurm controller answers: {_last_line(info)}")
        version = _slurm(["sbatch", "--version"]).stdout.strip()
        return {"runner": "slurm", "slurm": version, "partitions": info.stdout.split(),
                "partition": self.options.partition, "gpus_per_job": self.options.gpus}

    def submit(self, job: SeedJob) -> SlurmJob:
        seed_root = job.results_dir.parent
        script = seed_root / "slurm-job.sh"
        output = seed_root / "slurm-job.out"
        script.write_text(batch_script(job, self.options, project_root=self.project_root, output=output))
        result = _slurm(["sbatch", "--parsable", str(script)])
        if result.returncode != 0:
            raise RunnerError(f"sbatch refused seed {job.seed}: {_last_line(result)}")
        return SlurmJob(result.stdout.strip().split(";")[0], output)

    def dataset_command(
        self, workload: Workload, args: Sequence[DatasetArg], *, timeout_s: float, on_line: Callable[[str], None],
    ) -> DatasetResult:
        """On a node, through ``srun`` (blocking, output relayed); paths are the shared filesystem's."""
        argv = ["srun", "--nodes=1", "--ntasks=1", f"--job-name=mltrain-data-{workload.name}",
                f"--time={max(1, int(timeout_s / 60 + 0.999))}", f"--chdir={workload.folder}", "--quiet"]
        if self.options.partition:
            argv.append(f"--partition={self.options.partition}")
        argv += proc.resolve_argv([*workload.data.cli, *host_argv(args)])
        env = proc.child_env({}, pythonpath=self.project_root)
        try:
            result = proc.run_streaming(argv, cwd=Path.cwd(), env=env, timeout_s=timeout_s, on_line=on_line)
        except FileNotFoundError:
            raise RunnerError("srun not found: is this a Slurm login node?") from None
        return DatasetResult.of(result, "on a Slurm node")
