"""One seed of a benchmark run: its job (`seed_spec`), run on any backend by the one job runner
(`orchestrator.runners.jobs.run_job`: output kept as it arrives, the wall-clock limit, Ctrl-C), and
the `RunRecord` its MLLOG lines make.

`orchestrator.session.loop` decides which seeds run and records what they became."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from mlperf_logging.mllog import constants as C

from orchestrator.config.workloads import Workload
from orchestrator.errors import LogError
from orchestrator.insight import node_telemetry
from orchestrator.mlperf import mllog
from orchestrator.mlperf.quality import Goal
from orchestrator.results.paths import SeedPaths
from orchestrator.results.records import RunRecord, RunStatus
from orchestrator.runners.base import JobSpec, Runner
from orchestrator.runners.jobs import run_job
from orchestrator.runners.nodes import placement_of


@dataclass
class SeedProgress:
    """What the live table shows of a running seed (updated from its MLLOG lines)."""

    seed: int
    state: str = "pending"
    started: float | None = None
    ended: float | None = None
    epoch: float | None = None
    accuracy: float | None = None
    status: str = ""
    announced: bool = field(default=False, repr=False)
    """Its end was reported (where no live table shows it)."""
    samples_per_epoch: int | None = field(default=None, repr=False)
    """samples_per_epoch (else train_samples) as logged: what a samples-counted epoch number adds per epoch."""
    in_samples: bool | None = field(default=None, repr=False)
    """The log counts epochs in samples (`mllog.counts_samples`, decided at its first epoch number)."""

    def elapsed(self) -> float | None:
        if self.started is None:
            return None
        return (self.ended or time.monotonic()) - self.started

    def observe(self, line: str) -> None:
        event = mllog.try_parse_line(line)
        if event is None:
            return
        meta = event.metadata
        if event.key in (mllog.SAMPLES_PER_EPOCH, C.TRAIN_SAMPLES) and mllog.is_number(event.value):
            if event.key == mllog.SAMPLES_PER_EPOCH or self.samples_per_epoch is None:
                self.samples_per_epoch = int(event.value)
        elif event.key in (C.EPOCH_START, C.EPOCH_STOP) and C.EPOCH_NUM in meta:
            self.epoch = self._epochs(meta[C.EPOCH_NUM])
        elif event.key == C.BLOCK_START and C.FIRST_EPOCH_NUM in meta:
            self.epoch = self._epochs(meta[C.FIRST_EPOCH_NUM])
        elif event.key == C.EVAL_ACCURACY and isinstance(event.value, int | float):
            self.accuracy = float(event.value)

    def _epochs(self, number: float) -> float:
        """An epoch number as epochs, whether the log counts epochs or samples."""
        if self.in_samples is None:
            self.in_samples = mllog.counts_samples([float(number)], self.samples_per_epoch)
        return number / self.samples_per_epoch if self.in_samples and self.samples_per_epoch else number


def seed_spec(*, run_id: str, seed: int, workload: Workload, data_dir: Path, paths: SeedPaths,
              env: Mapping[str, str]) -> JobSpec:
    """The job of one seed: the workload's ``run`` and the seed, in the seed's folder."""
    return JobSpec(kind="seed", name=f"seed{seed}", run_id=run_id, bundle=workload, command=workload.run,
                   args=(str(seed),), env=env, data_dir=data_dir, folder=paths.root, seed=seed,
                   declared=f"{workload.folder / 'workload.yaml'} field run",
                   node_wrapper=("python", "-m", node_telemetry.__name__, str(paths.node_telemetry), "--"))


def run_seed(
    runner: Runner,
    job: JobSpec,
    *,
    checked: bool = False,
    timeout_s: float,
    goal: Goal,
    samples_per_epoch: int | None,
    progress: SeedProgress,
    on_update: Callable[[], None] = lambda: None,
    warning: Callable[[str], None] = lambda _: None,
) -> RunRecord:
    """Run one seed to its end and return its record. A seed whose output could not be kept whole is
    a crash (an infrastructure fault: whatever its log says, it was not measured). KeyboardInterrupt
    (any stop signal) stops the job in order, then propagates (the caller marks the seed interrupted).
    ``checked``: the runner has checked this very job already (`run_job`)."""
    progress.state, progress.started = "running", time.monotonic()
    try:
        outcome = run_job(runner, job, checked=checked, timeout_s=timeout_s, on_line=progress.observe,
                          on_tick=on_update)
    except KeyboardInterrupt:
        progress.state, progress.ended, progress.status = "interrupted", time.monotonic(), "interrupted"
        raise
    if outcome.leftovers:
        warning(f"seed {job.seed}: {outcome.leftover_note()}")
    try:
        log = mllog.parse_file(outcome.log)
    except LogError:
        if not outcome.lost:
            raise
        log = mllog.parse_lines([])
    record = mllog.build_record(log, goal=goal, exit=outcome.explained_exit(),
                                ended=RunStatus.TIMED_OUT if outcome.timed_out else None,
                                samples_per_epoch=samples_per_epoch)
    if outcome.lost:  # the log is not whole: whatever it says, the run was not measured
        record = record.model_copy(update={"status": RunStatus.CRASHED, "reason": outcome.lost})
    if (placement := placement_of(outcome.log)) is not None:  # a seed across nodes: each node's launcher said
        record = record.model_copy(update={"placement": placement})
    progress.state, progress.ended, progress.status = "finished", time.monotonic(), record.status.value
    on_update()
    return record
