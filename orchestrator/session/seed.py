"""Run one seed on any backend: stream its output to the log file as it arrives, enforce the
wall-clock limit, stop it on Ctrl-C, and turn what it logged into a `RunRecord`.

This is the only code that touches a running seed; `orchestrator.session.loop` decides which
seeds run and records what they became."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from mlperf_logging.mllog import constants as C

from orchestrator.errors import LogError
from orchestrator.insight import resource_errors
from orchestrator.mlperf import mllog
from orchestrator.mlperf.quality import Goal
from orchestrator.results.paths import SeedPaths
from orchestrator.results.records import Exit, RunRecord, RunStatus
from orchestrator.runners.base import Job, Runner, SeedJob


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


STOP_WAIT_S = 90.0
"""After a cancel, how long to wait for a job to end (Slurm's cancel alone may take 60 s)."""


class _Follower(threading.Thread):
    """Streams a job's output into its log as it arrives, then waits for the job's exit: the one
    thread that calls `Job.stream` and `Job.wait`, as the runner interface asks."""

    def __init__(self, handle: Job, paths: SeedPaths, progress: SeedProgress, on_update: Callable[[], None]) -> None:
        super().__init__(name=f"seed-{progress.seed}-output", daemon=True)
        self.handle, self.paths, self.progress, self.on_update = handle, paths, progress, on_update
        self.error: BaseException | None = None
        """Why the output stopped being kept (the log could not be written, the stream broke)."""
        self.exit: Exit | None = None

    def run(self) -> None:
        try:
            self._pump()
        except BaseException as exc:  # noqa: BLE001 - reported to the seed's thread, which stops the job
            self.error = exc
            with contextlib.suppress(BaseException):
                for _ in self.handle.stream():  # keep the job from blocking on a full pipe until it is stopped
                    pass
        try:
            self.exit = self.handle.wait()
        except BaseException as exc:  # noqa: BLE001 - as above
            self.error = self.error or exc

    def _pump(self) -> None:
        pending = b""
        with self.paths.output.open("ab") as log:
            for chunk in self.handle.stream():
                log.write(chunk)
                log.flush()
                pending += chunk
                *complete, pending = pending.split(b"\n")
                for raw in complete:
                    self.progress.observe(raw.decode(errors="replace"))
                if complete:
                    self.on_update()


def run_seed(
    runner: Runner,
    job: SeedJob,
    paths: SeedPaths,
    *,
    timeout_s: float,
    goal: Goal,
    samples_per_epoch: int | None,
    progress: SeedProgress,
    on_update: Callable[[], None] = lambda: None,
) -> RunRecord:
    """Run one seed to its end and return its record. The wall-clock limit holds whatever happens
    to the output thread; if that thread cannot keep the output, the job is stopped and the seed is
    a crash (an infrastructure fault: its log is not whole). KeyboardInterrupt (any stop signal)
    stops the job in order, then propagates (the caller marks the seed interrupted)."""
    paths.results.mkdir(parents=True, exist_ok=True)
    progress.state, progress.started = "running", time.monotonic()
    handle = runner.submit(job)
    follower = _Follower(handle, paths, progress, on_update)
    follower.start()
    ended: RunStatus | None = None
    lost: str | None = None
    deadline = time.monotonic() + timeout_s
    stopped_at: float | None = None
    try:
        while follower.is_alive():
            now = time.monotonic()
            follower.join(timeout=min(0.5, max(deadline - now, 0.01)))
            on_update()
            if not follower.is_alive():
                break
            if stopped_at is None and (follower.error is not None or time.monotonic() >= deadline):
                ended = RunStatus.TIMED_OUT if follower.error is None else None
                handle.cancel()
                stopped_at = time.monotonic()
            elif stopped_at is not None and time.monotonic() - stopped_at > STOP_WAIT_S:
                lost = f"the output of job {handle.job_id} did not end within {STOP_WAIT_S:g} s of stopping it"
                break
    except KeyboardInterrupt:
        handle.cancel()
        follower.join(timeout=STOP_WAIT_S)
        progress.state, progress.ended, progress.status = "interrupted", time.monotonic(), "interrupted"
        raise
    fault = f"mltrain lost the run's output ({_one_line(follower.error)})" if follower.error else lost
    if follower.exit is None:  # the job's end was not seen: make sure it has ended
        handle.cancel()
        fault = fault or "mltrain did not see the job end"
    exit = _with_oom_hint(follower.exit or Exit(code=None, detail=fault or ""), paths)
    try:
        log = mllog.parse_file(paths.output)
    except LogError:
        if not fault:
            raise
        log = mllog.parse_lines([])
    record = mllog.build_record(log, goal=goal, exit=exit, ended=ended, samples_per_epoch=samples_per_epoch)
    if fault:  # the log is not whole: whatever it says, the run was not measured
        record = record.model_copy(update={"status": RunStatus.CRASHED, "reason": fault})
    progress.state, progress.ended, progress.status = "finished", time.monotonic(), record.status.value
    on_update()
    return record


def _one_line(exc: BaseException | None) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())[:300] if exc else ""


def _with_oom_hint(exit: Exit, paths: SeedPaths) -> Exit:
    """A failed run says what failed: a resource error found in its output (out of memory, NCCL,
    disk full ...) rather than a bare exit status."""
    if exit.code in (0, None) or exit.oom_killed:
        return exit
    errors = resource_errors.classify(_tail(paths, 65536))
    if errors:
        detail = "; ".join(f"{e.summary}: {e.line[:160]}" for e in errors[:2])
        return Exit(code=exit.code, oom_killed=resource_errors.is_out_of_memory(errors), detail=detail)
    last = _tail(paths, 2048).strip().splitlines()
    detail = f"exited with status {exit.code}" + (f": {last[-1][:200]}" if last else "")
    return Exit(code=exit.code, oom_killed=False, detail=exit.detail or detail)


def _tail(paths: SeedPaths, size: int) -> str:
    try:
        with paths.output.open("rb") as handle:
            handle.seek(0, 2)
            handle.seek(max(handle.tell() - size, 0))
            return handle.read().decode(errors="replace")
    except OSError:
        return ""
