"""The runner interface, in the spirit of submitit's executors.

A backend turns a `SeedJob` (what to run, with which data and results folders) into a running
`Job`, whose output can be streamed and which can be waited for and cancelled. Timeouts,
log files, signals and bookkeeping are the caller's (`orchestrator.session.seed`), the same for
every backend. A backend also refuses, before anything is written, a job it cannot express
(`check_job`), and finds and stops what a killed mltrain left of a run (`stop_leftovers`).
"""

from __future__ import annotations

import subprocess
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.config.workloads import Workload
from orchestrator.results.records import Exit


@dataclass(frozen=True)
class SeedJob:
    """One run of ``run_and_time.sh <seed>`` (or of ``command``, where one is given)."""

    run_id: str
    seed: int
    workload: Workload
    data_dir: Path
    """Training-ready dataset on the host (read only)."""
    results_dir: Path
    """This seed's results folder on the host."""
    env: Mapping[str, str]
    """Profile variables (quality target, MLTRAIN_PROFILE, workload knobs). The backend adds
    DATADIR and RESULTS_DIR as the run will see them."""
    labels: Mapping[str, str] = field(default_factory=dict)
    """Identify the job on shared infrastructure (container labels, Slurm comment)."""
    command: tuple[str, ...] = ()
    """Run this argv (relative to the workload folder, like ``run``) instead of the workload's ``run``
    and the seed: a qualification step (a probe, the workload's ``throughput`` entry)."""

    def argv(self) -> list[str]:
        """What the job runs: ``command``, else the workload's ``run`` and the seed."""
        return list(self.command) if self.command else [*self.workload.run, str(self.seed)]


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
    """A place where seeds run: this host, a Docker engine, a Slurm cluster."""

    name: str
    sampled_gpus: tuple[str, ...] | None = None
    """This host's GPUs the seeds use (indices or UUIDs), which telemetry samples; None: every
    GPU of the host, (): none of this host's (no GPU, or the run is on another machine)."""
    gpu_numbering: str = "cuda"
    """Whose indices `sampled_gpus` holds: "cuda" (CUDA_VISIBLE_DEVICES, PCI bus order under the
    CUDA_DEVICE_ORDER=PCI_BUS_ID mltrain sets) or "nvml" (NVML's own, as the NVIDIA container
    toolkit numbers a Docker device request); telemetry finds the GPUs accordingly."""

    @abstractmethod
    def prepare(self, workload: Workload) -> dict[str, Any]:
        """Make everything ready before the first seed (image build, runtime checks); return
        provenance for the run manifest (image id, versions...). Raise RunnerError when the
        backend cannot run this workload."""

    @abstractmethod
    def submit(self, job: SeedJob) -> Job:
        """Start one seed."""

    @abstractmethod
    def stop_leftovers(self, run_id: str, seeds: Sequence[int]) -> list[str]:
        """Stop and remove whatever of run ``run_id`` still runs here (left by a killed mltrain);
        return what was stopped. Called only by the holder of the run's lock, before its seeds run."""

    def check_job(self, job: SeedJob) -> None:  # noqa: B027 - most backends take any job
        """Raise UsageError or ConfigError, before anything is written, for a job this backend
        cannot carry (a value its submission format cannot hold, a program that is not there)."""

    @abstractmethod
    def dataset_command(
        self, workload: Workload, args: Sequence[DatasetArg], *, timeout_s: float, on_line: Callable[[str], None],
    ) -> DatasetResult:
        """Run the workload's dataset command line (``data.cli`` + ``args``) where its seeds run, so
        that what it needs (torch, nibabel ...) is what the seeds have. Lines of its standard error
        go to ``on_line`` as they come. Raise subprocess.TimeoutExpired after ``timeout_s``; called
        after `prepare`."""
