"""The runner interface, in the spirit of submitit's executors.

A backend turns a `JobSpec` (what to run, with which data, in which folder, marked with which run)
into a running `Job`, whose output can be streamed and which can be waited for and cancelled. Log
files, time limits, signals and the outcome are the caller's, the same for every backend and every
kind of job (`orchestrator.runners.jobs.run_job`). A backend also refuses, before anything is
written, a job it cannot express (`check_job`), and finds and stops what a killed mltrain left of
a run (`stop_leftovers`).
"""

from __future__ import annotations

import subprocess
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from orchestrator.config.workloads import DataDecl, ImageDecl
from orchestrator.errors import EXIT_USAGE, DataError, InfrastructureError, MltrainError
from orchestrator.results.paths import JobPaths
from orchestrator.results.records import Exit

LABEL_RUN_ID = "mltrain.run_id"
LABEL_JOB = "mltrain.job"
LABEL_KIND = "mltrain.kind"
LABEL_SEED = "mltrain.seed"
LABEL_WORKLOAD = "mltrain.workload"
"""The marks every job carries (container labels, a Slurm job's comment)."""


class Bundle(Protocol):
    """The code a job runs, as a runner needs it: a training workload (`config.workloads.Workload`)
    or an inference harness (`inference.declaration.Harness`); each is one folder of `workloads/`."""

    @property
    def name(self) -> str:
        """Names its image and marks its jobs."""

    @property
    def folder(self) -> Path:
        """Where its commands run; their argv is relative to it."""

    @property
    def run(self) -> tuple[str, ...]:
        """Its main command (recorded as the runner's provenance)."""

    @property
    def data(self) -> DataDecl:
        """Its dataset command line (`Runner.dataset_command`)."""

    @property
    def image(self) -> ImageDecl | None:
        """Its Dockerfile (the Docker runner)."""


JobKind = Literal["seed", "step", "inference", "node"]


@dataclass(frozen=True, kw_only=True)
class JobSpec:
    """One job for a runner: a command of a bundle's folder, its environment and data, its own folder,
    and the run it belongs to, by which it is found again."""

    kind: JobKind
    """seed: one seed of a benchmark run; step: a qualification step (the probe, the throughput mode);
    inference: a harness run of `mltrain infer`; node: one node's qualification in a Slurm fleet."""
    name: str
    """The job's name in its run (seed7, probe, trial_2, node-gpu07): its container's and Slurm job's name."""
    run_id: str
    """The run it belongs to (a benchmark run, a qualification, an inference run, a fleet): the job
    carries it, and `Runner.stop_leftovers` finds what a killed mltrain left by it."""
    bundle: Bundle
    command: tuple[str, ...]
    """argv relative to the bundle's folder, as declared (its ``run``, its ``throughput`` mode, a probe)."""
    args: tuple[str, ...] = ()
    """Words after ``command`` (the seed, a harness's options)."""
    env: Mapping[str, str]
    """What the job is told (profile variables, knobs). The backend adds DATADIR and RESULTS_DIR as
    the job will see them."""
    data_dir: Path
    """The dataset on this host (read only; /data in a container)."""
    folder: Path
    """The job's own folder (`JobPaths`): its output, its RESULTS_DIR, a Slurm job's batch files."""
    declared: str = ""
    """Where ``command`` is declared (a workload.yaml field), named when it cannot run."""
    seed: int | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    """More marks for shared infrastructure, beside those `marks` always gives."""
    node_wrapper: tuple[str, ...] = ()
    """Words that start the job's part on each node of a batch system, its command after them (a
    seed's: the sampler of each node's own telemetry). Runners that run the job on this host ignore them."""

    def __post_init__(self) -> None:
        # The one rule for the paths a job is handed, whatever the command: absolute, as this process
        # sees them (a job runs in its bundle's folder, a container or a Slurm node, where a path
        # relative to mltrain's current folder names something else).
        object.__setattr__(self, "data_dir", Path(self.data_dir).absolute())
        object.__setattr__(self, "folder", Path(self.folder).absolute())

    @property
    def paths(self) -> JobPaths:
        return JobPaths(self.folder)

    @property
    def results_dir(self) -> Path:
        return self.paths.results

    def argv(self) -> list[str]:
        return [*self.command, *self.args]

    def marks(self) -> dict[str, str]:
        """What identifies the job on shared infrastructure (container labels, a Slurm job's comment)."""
        seed = {LABEL_SEED: str(self.seed)} if self.seed is not None else {}
        return {**self.labels, LABEL_RUN_ID: self.run_id, LABEL_JOB: self.name, LABEL_KIND: self.kind,
                LABEL_WORKLOAD: self.bundle.name, **seed}

    def where_declared(self) -> str:
        return self.declared or f"the {self.kind} job {self.name}"


@dataclass(frozen=True, kw_only=True)
class HostPath:
    """A folder of this host given to a dataset command as one argument. The runner makes it
    visible where the command runs: as it is on this host or a Slurm node (shared filesystem),
    mounted in a helper container for Docker."""

    path: Path
    writable: bool = False
    """Whether the command writes there (else it is mounted read-only)."""
    mount: Path | None = None
    """The folder to make visible when it must be an ancestor of ``path`` (a command that stages
    its output beside it); default: ``path`` itself."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", Path(self.path).absolute())  # as a job's paths: `JobSpec`
        if self.mount is not None:
            object.__setattr__(self, "mount", Path(self.mount).absolute())

    @property
    def root(self) -> Path:
        return self.mount or self.path


DatasetArg = str | HostPath
"""An argument of a dataset command: a word, or a host folder."""


@dataclass(frozen=True, kw_only=True)
class DatasetResult:
    """What a dataset command did."""

    returncode: int
    stdout: str
    """Its whole standard output (a command such as ``prepare`` prints a folder there)."""
    stderr_tail: tuple[str, ...]
    """Its last lines of standard error (the one-line error of a failed command is the last)."""
    where: str
    """Where it ran, for messages: "on this host", "in mltrain/unet3d:...", "on a Slurm node"."""
    mounts: tuple[tuple[str, Path], ...] = ()
    """(path where the command ran, host path) of each folder a container saw."""

    @classmethod
    def of(cls, process: subprocess.CompletedProcess[str], where: str) -> DatasetResult:
        """From a process run here, or one that relays the command's output (srun)."""
        return cls(returncode=process.returncode, stdout=process.stdout,
                   stderr_tail=tuple((process.stderr or "").splitlines()[-20:]), where=where)

    def host_path(self, printed: str) -> Path:
        """A path the command printed, as this host sees it."""
        for inside, host in self.mounts:
            if printed == inside or printed.startswith(inside + "/"):
                return host / printed[len(inside):].lstrip("/")
        return Path(printed)

    def host_text(self, line: str) -> str:
        """A line the command printed, with the paths it saw written as this host's."""
        return host_text(line, self.mounts)

    def failure(self, what: str) -> MltrainError:
        """The error of a command that failed, by the contract's exit codes: where it refused its input
        (exit 2) its own line, the input's fault wherever it ran (DataError); else ``what`` failed
        where it ran (InfrastructureError: a crash, a kill, a full disk say nothing of the input)."""
        if self.returncode == EXIT_USAGE:
            return DataError(f"{what}: {self.last_line()}")
        return InfrastructureError(f"{what} failed {self.where}: {self.last_line()}")

    def last_line(self) -> str:
        """The command's one-line answer: its last line of standard error (as this host's paths, an
        ``error:`` prefix dropped), else its exit status."""
        lines = [line.strip() for line in self.stderr_tail if line.strip()]
        if not lines:
            return f"exit status {self.returncode}"
        last = self.host_text(lines[-1])
        return last[len("error:"):].strip() if last.lower().startswith("error:") else last


def host_text(line: str, mounts: Sequence[tuple[str, Path]]) -> str:
    """``line`` with each mounted folder's path where the command ran replaced by the host's."""
    for inside, host in mounts:
        line = line.replace(inside, str(host))
    return line


def host_argv(args: Sequence[DatasetArg]) -> list[str]:
    """Dataset-command arguments where the command sees this host's paths as they are."""
    return [str(a.path) if isinstance(a, HostPath) else a for a in args]


class Job(ABC):
    """A submitted run. `stream` and `wait` are called from one thread, `cancel` from any."""

    job_id: str
    leftovers: Sequence[str] = ()
    """What the job left running after it ended, which the runner stopped ('pid 42 (sleep)')."""

    @abstractmethod
    def stream(self) -> Iterator[bytes]:
        """Yield the run's combined stdout/stderr as it arrives; ends when the run ends."""

    @abstractmethod
    def wait(self) -> Exit:
        """Block until the run has ended; release what it held (process, container)."""

    @abstractmethod
    def cancel(self) -> None:
        """Stop the run now (idempotent): terminate, then kill after a short grace period."""


class Runner(ABC):
    """A place where jobs run: this host, a Docker engine, a Slurm cluster."""

    name: str
    sampled_gpus: tuple[str, ...] | None = None
    """This host's GPUs the jobs use (indices or UUIDs), which telemetry samples; None: every
    GPU of the host, (): none of this host's (no GPU, or the jobs run on another machine)."""
    gpu_numbering: str = "cuda"
    """Whose indices `sampled_gpus` holds: "cuda" (CUDA_VISIBLE_DEVICES, PCI bus order under the
    CUDA_DEVICE_ORDER=PCI_BUS_ID mltrain sets) or "nvml" (NVML's own, as the NVIDIA container
    toolkit numbers a Docker device request); telemetry finds the GPUs accordingly."""

    @abstractmethod
    def prepare(self, bundle: Bundle) -> dict[str, Any]:
        """Make everything ready before the first job (image build, runtime checks); return
        provenance for the run's record (image id, versions...). Raise RunnerError when the
        backend cannot run this bundle."""

    @abstractmethod
    def submit(self, spec: JobSpec) -> Job:
        """Start one job."""

    @abstractmethod
    def stop_leftovers(self, run_id: str) -> list[str]:
        """Stop and remove whatever of run ``run_id`` still runs here (left by a killed mltrain, or
        caught half started by a stop signal); return what was stopped. Called only where nothing
        else runs that run (its holder, or after its holder died)."""

    def check_job(self, spec: JobSpec) -> None:  # noqa: B027 - most backends take any job
        """Raise UsageError or ConfigError, before anything is written, for a job this backend
        cannot carry (a value its submission format cannot hold, a program that is not there)."""

    @abstractmethod
    def dataset_command(
        self, bundle: Bundle, args: Sequence[DatasetArg], *, timeout_s: float, on_line: Callable[[str], None],
    ) -> DatasetResult:
        """Run the bundle's dataset command line (``data.cli`` + ``args``) where its jobs run, so
        that what it needs (torch, nibabel ...) is what the jobs have. Lines of its standard error
        go to ``on_line`` as they come. Raise subprocess.TimeoutExpired after ``timeout_s``; called
        after `prepare`."""
