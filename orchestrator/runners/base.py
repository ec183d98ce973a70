"""The runner interface, in the spirit of submitit's executors.

A backend turns a `SeedJob` (what to run, with which data and results folders) into a running
`Job`, whose output can be streamed and which can be waited for and cancelled. Timeouts,
log files, signals and bookkeeping are the caller's (`orchestrator.session.seed`), the same for
every backend. A backend also refuses, before anything is written, a job it cannot express
(`check_job`), and finds and stops what a killed mltrain left of a run (`stop_leftovers`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
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
