"""Run one seed on any backend: stream its output to the log file as it arrives, enforce the
wall-clock limit, stop it on Ctrl-C, and turn what it logged into a `RunRecord`.

This is the only code that touches a running seed; `orchestrator.session.loop` decides which
seeds run and records what they became."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from mlperf_logging.mllog import constants as C

from orchestrator.insight import resource_errors
from orchestrator.mlperf import mllog
from orchestrator.results.paths import SeedPaths
from orchestrator.results.records import Exit, RunRecord, RunStatus
from orchestrator.runners.base import Runner, SeedJob


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

    def elapsed(self) -> float | None:
        if self.started is None:
            return None
        return (self.ended or time.monotonic()) - self.started

    def observe(self, line: str) -> None:
        event = mllog.try_parse_line(line)
        if event is None:
            return
        meta = event.metadata
        if event.key in (C.EPOCH_START, C.EPOCH_STOP) and C.EPOCH_NUM in meta:
            self.epoch = meta[C.EPOCH_NUM]
        elif event.key == C.BLOCK_START and C.FIRST_EPOCH_NUM in meta:
            self.epoch = meta[C.FIRST_EPOCH_NUM]
        elif event.key == C.EVAL_ACCURACY and isinstance(event.value, int | float):
            self.accuracy = float(event.value)


def run_seed(
    runner: Runner,
    job: SeedJob,
    paths: SeedPaths,
    *,
    timeout_s: float,
    target: float,
    metric: str,
    progress: SeedProgress,
    on_update: Callable[[], None] = lambda: None,
) -> RunRecord:
    """Run one seed to its end and return its record. KeyboardInterrupt stops the run, then
    propagates (the caller marks the seed interrupted)."""
    paths.results.mkdir(parents=True, exist_ok=True)
    progress.state, progress.started = "running", time.monotonic()
    handle = runner.submit(job)
    reader_error: list[BaseException] = []

    def pump() -> None:
        pending = b""
        try:
            with paths.output.open("ab") as log:
                for chunk in handle.stream():
                    log.write(chunk)
                    log.flush()
                    pending += chunk
                    *complete, pending = pending.split(b"\n")
                    for raw in complete:
                        progress.observe(raw.decode(errors="replace"))
                    if complete:
                        on_update()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            reader_error.append(exc)

    reader = threading.Thread(target=pump, name=f"seed-{job.seed}-output", daemon=True)
    reader.start()
    ended: RunStatus | None = None
    deadline = time.monotonic() + timeout_s
    try:
        while reader.is_alive():
            reader.join(timeout=min(0.5, max(deadline - time.monotonic(), 0.01)))
            on_update()
            if reader.is_alive() and time.monotonic() >= deadline:
                ended = RunStatus.TIMED_OUT
                handle.cancel()
                reader.join()
    except KeyboardInterrupt:
        handle.cancel()
        reader.join(timeout=30)
        handle.wait()
        progress.state, progress.ended, progress.status = "interrupted", time.monotonic(), "interrupted"
        raise
    exit = handle.wait()
    if reader_error:
        raise reader_error[0]
    exit = _with_oom_hint(exit, paths)
    record = mllog.build_record(mllog.parse_file(paths.output), target=target, metric=metric, exit=exit, ended=ended)
    progress.state, progress.ended, progress.status = "finished", time.monotonic(), record.status.value
    on_update()
    return record


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
