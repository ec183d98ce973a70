"""Run a job on any runner, the one way every kind of job runs (a seed, a qualification step, an
inference harness run, a fleet's node job):

    check_job -> its folder -> submit -> output streamed into its log as it arrives (each line to a
    callback) -> its exit, within its wall-clock limit -> a `JobOutcome` that can explain itself

The wall-clock limit holds whatever the output thread does: a job whose output can no longer be
kept is stopped, and one whose output does not end within `STOP_WAIT_S` of being stopped is given
up (its outcome says so). A log mltrain cannot write (a full disk) is mltrain's failure, not the
job's: once the job is stopped, the write's error is raised (exit 3), never an outcome a check
would judge. A stop signal (KeyboardInterrupt, which `orchestrator.signals` raises for
SIGINT, SIGTERM and SIGHUP) stops the job in order, then removes whatever of its run the signal
caught half started (`Runner.stop_leftovers`), then propagates; so does any error raised while the
job runs (a callback's), which never leaves the job running behind it.

Several jobs at once (the fleet: one per node) are started with `start_job` and each is followed to
its end with `StartedJob.finish`; `stop_jobs` stops them all in order.

A dataset command is not such a job: it runs before the jobs, keeps its standard output apart (the
folder it prints) and sees host folders as arguments (`Runner.dataset_command`); `dataset_command`
is its one call, with its one-line answer (`DatasetResult.last_line`).
"""

from __future__ import annotations

import contextlib
import math
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from orchestrator.errors import DataError, StoreError, StoreWriteError
from orchestrator.results import atomic
from orchestrator.results.records import Exit
from orchestrator.runners.base import Bundle, DatasetArg, DatasetResult, Job, JobSpec, Runner
from orchestrator.runners.outcome import JobOutcome

STOP_WAIT_S = 90.0
"""After a job is cancelled (its limit, a stop signal, its output lost), how long to wait for it to
end: a Slurm cancel alone may take 60 s, a container's stop 10 s before its kill."""
TICK_S = 0.5
"""How often the waiting thread wakes (to check the limit, and for ``on_tick``)."""
MAX_LINE_BYTES = 1 << 20
"""The most of one line handed on to ``on_line`` (the log keeps it whole): no reader of lines wants
more (an MLLOG line is at most 65,536 characters), and a line without end is memory without end."""


class LineSplitter:
    """Bytes as they arrive, cut into lines for ``on_line``, in time linear in what arrives: a line
    is gathered in pieces and joined once (re-splitting what was pending with each chunk took 187 s
    for one 100 MiB line); past `MAX_LINE_BYTES` the rest of a line is not kept."""

    def __init__(self, on_line: Callable[[str], None], max_bytes: int = MAX_LINE_BYTES) -> None:
        self.on_line, self.max_bytes = on_line, max_bytes
        self.pieces: list[bytes] = []
        self.kept = 0
        self.open = False
        """Bytes of a line have arrived since the last newline."""

    def feed(self, chunk: bytes) -> None:
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            self._keep(chunk[start:end])
            self._hand_on()
            start = end + 1
        if start < len(chunk):
            self._keep(chunk[start:])
            self.open = True

    def close(self) -> None:
        """The output ended: its last line, when it had no newline."""
        if self.open:
            self._hand_on()

    def _keep(self, piece: bytes) -> None:
        room = self.max_bytes - self.kept
        if room > 0 and piece:
            self.pieces.append(piece[:room])
            self.kept += min(len(piece), room)

    def _hand_on(self) -> None:
        line = b"".join(self.pieces)
        self.pieces, self.kept, self.open = [], 0, False
        self.on_line(line.decode(errors="replace"))


def _nothing() -> None:
    return None


class _Follower(threading.Thread):
    """Streams a job's output into its log as it arrives, handing each line on, then waits for the
    job's exit: the one thread that calls `Job.stream` and `Job.wait`, as the runner interface asks."""

    def __init__(self, handle: Job, log: Path, on_line: Callable[[str], None], name: str) -> None:
        super().__init__(name=f"{name}-output", daemon=True)
        self.handle, self.log, self.on_line = handle, log, on_line
        self.error: BaseException | None = None
        """Why the output stopped being kept (the log could not be written, the stream broke)."""
        self.exit: Exit | None = None

    def run(self) -> None:
        try:
            self._pump()
        except BaseException as exc:  # noqa: BLE001 - reported to the waiting thread, which stops the job
            self.error = exc
            with contextlib.suppress(BaseException):
                for _ in self.handle.stream():  # keep the job from blocking on a full pipe until it is stopped
                    pass
        try:
            self.exit = self.handle.wait()
        except BaseException as exc:  # noqa: BLE001 - as above
            self.error = self.error or exc

    def _pump(self) -> None:
        lines = LineSplitter(self.on_line)
        with atomic.open_append(self.log) as log:  # never through a link left in the job's folder
            for chunk in self.handle.stream():
                with atomic.writing(self.log):  # a full disk: the job is stopped, the write's error raised
                    log.write(chunk)
                    log.flush()
                lines.feed(chunk)
        lines.close()


class StartedJob:
    """A job on its runner, its output being followed; `finish` waits for its end within its limit."""

    def __init__(self, runner: Runner, spec: JobSpec, handle: Job, on_line: Callable[[str], None],
                 timeout_s: float | None) -> None:
        self.runner, self.spec, self.handle = runner, spec, handle
        self.started = time.monotonic()
        self.deadline = self.started + timeout_s if timeout_s is not None else math.inf
        self.follower = _Follower(handle, spec.paths.output, on_line, spec.name)
        self.follower.start()

    @property
    def job_id(self) -> str:
        return self.handle.job_id

    def finish(self, on_tick: Callable[[], None] = _nothing) -> JobOutcome:
        """Wait for the job's end, stopping it at its limit or when its output cannot be kept."""
        follower = self.follower
        timed_out = False
        lost = ""
        stopped_at: float | None = None
        while follower.is_alive():
            follower.join(timeout=min(TICK_S, max(self.deadline - time.monotonic(), 0.01)))
            on_tick()
            if not follower.is_alive():
                break
            if stopped_at is None and (follower.error is not None or time.monotonic() >= self.deadline):
                timed_out = follower.error is None
                self.handle.cancel()
                stopped_at = time.monotonic()
            elif stopped_at is not None and time.monotonic() - stopped_at > STOP_WAIT_S:
                lost = f"the output of job {self.job_id} did not end within {STOP_WAIT_S:g} s of stopping it"
                break
        if follower.error is not None:
            lost = f"mltrain lost the job's output ({_one_line(follower.error)})"
        if follower.exit is None:  # the job's end was not seen: make sure it has ended
            self.handle.cancel()
            lost = lost or "mltrain did not see the job end"
        if isinstance(follower.error, StoreError | StoreWriteError):
            raise follower.error  # mltrain could not write the job's log: its fault, not the job's (exit 3)
        outcome = JobOutcome(job_id=self.job_id, exit=follower.exit or Exit(code=None, detail=lost),
                             timed_out=timed_out, lost=lost, seconds=time.monotonic() - self.started,
                             log=self.spec.paths.output, leftovers=tuple(self.handle.leftovers))
        if outcome.leftovers:  # said in the log too, after all it printed
            with contextlib.suppress(OSError), atomic.open_append(self.spec.paths.output) as log:
                log.write(f"mltrain: {outcome.leftover_note()}\n".encode())
        return outcome

    def stop(self) -> None:
        """Cancel the job and wait (a while) for its output to end: how a stop signal ends it."""
        self.handle.cancel()
        self.follower.join(timeout=STOP_WAIT_S)


def start_job(runner: Runner, spec: JobSpec, *, timeout_s: float | None,
              on_line: Callable[[str], None] = lambda line: None, checked: bool = False) -> StartedJob:
    """Check the job (unless ``checked``: the caller had ``runner`` check this very spec before
    anything was written), make its folder, submit it and follow its output into ``output.log``.
    The runner's error (UsageError, ConfigError, RunnerError) when it refuses or cannot start it;
    ``timeout_s`` None: no limit of mltrain's (Slurm's own time limit holds the job)."""
    if not checked:
        runner.check_job(spec)
    atomic.make_folder(spec.results_dir)
    return StartedJob(runner, spec, runner.submit(spec), on_line, timeout_s)


def run_job(runner: Runner, spec: JobSpec, *, timeout_s: float | None, on_line: Callable[[str], None] = lambda line:
            None, on_tick: Callable[[], None] = _nothing, checked: bool = False) -> JobOutcome:
    """Run ``spec`` on ``runner`` to its end (or its limit) and say how it ended. Each line of its
    output goes to ``on_line`` (from the output thread) as it arrives; ``on_tick`` is called from
    this thread at least every `TICK_S`. A stop signal (or an error) stops the job in order and propagates.
    ``checked``: as `start_job`'s."""
    started: list[StartedJob] = []
    try:
        started.append(start_job(runner, spec, timeout_s=timeout_s, on_line=on_line, checked=checked))
        return started[0].finish(on_tick)
    except BaseException:
        stop_jobs([(runner, spec.run_id)], started)
        raise


def stop_jobs(runs: Iterable[tuple[Runner, str]], started: Iterable[StartedJob]) -> None:
    """After a stop signal (or an error): each started job cancelled and waited for, then whatever of
    each run the signal caught half started removed (a process or container whose start was under way, a job
    whose removal had not run yet). Best effort for the last part: the signal, not a clean-up error,
    is what the user must see; the next run's `Runner.stop_leftovers` clears what stays."""
    for job in started:
        with contextlib.suppress(Exception):
            job.stop()
    for runner, run_id in runs:
        with contextlib.suppress(Exception):
            runner.stop_leftovers(run_id)


def dataset_command(runner: Runner, bundle: Bundle, args: Sequence[DatasetArg], *, timeout_s: float,
                    on_line: Callable[[str], None]) -> DatasetResult:
    """The bundle's dataset command ``args`` where its jobs run; DataError naming the command when it
    takes over ``timeout_s`` or cannot start."""
    try:
        return runner.dataset_command(bundle, args, timeout_s=timeout_s, on_line=on_line)
    except subprocess.TimeoutExpired:
        raise DataError(f"{bundle.name} dataset command {args[0]} took over {timeout_s:.0f} s") from None
    except OSError as exc:
        raise DataError(f"{bundle.name} dataset command {' '.join(bundle.data.cli)}: {exc.strerror}") from None


def _one_line(exc: BaseException) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
