"""How a job ended, and why, in one line: its exit as the runner saw it, read together with the
tail of its output (the resource errors found there: out of memory, NCCL, disk full ...; else the
last line it printed). The one reader of a job's output tail and the one explanation of a failure,
for every kind of job (`orchestrator.runners.jobs.run_job` returns a `JobOutcome`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from orchestrator.errors import EXIT_USAGE
from orchestrator.results.records import Exit
from orchestrator.runners import resource_errors

TAIL_BYTES = 65536
"""How much of a job's output is searched for resource errors."""
LAST_LINE_BYTES = 2048
"""How much of it holds the last line said."""
MAX_ERRORS = 2
"""Resource errors named in one explanation."""


def read_tail(path: Path, size: int = TAIL_BYTES) -> str:
    """The last ``size`` bytes of a file as text ('' when it cannot be read)."""
    try:
        with path.open("rb") as handle:
            handle.seek(0, 2)
            handle.seek(max(handle.tell() - size, 0))
            return handle.read().decode(errors="replace")
    except OSError:
        return ""


def last_line(text: str) -> str:
    """The last line of ``text`` that says something, stripped ('' when none does)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def explain_exit(exit: Exit, tail: str) -> Exit:
    """``exit`` with what the output's tail says about it. A failed job's resource errors (their
    summary and first line; a memory one makes it an out-of-memory exit); else the runner's own word
    on the exit (or its status) and the last line said. A clean exit, one the runner already found
    out of memory, and one whose status is unknown, are kept as they are."""
    if exit.code in (0, None) or exit.oom_killed:
        return exit
    errors = resource_errors.classify(tail)
    if errors:
        detail = "; ".join(f"{e.summary}: {e.line[:160]}" for e in errors[:MAX_ERRORS])
        detail = f"{exit.detail}: {detail}" if exit.failed_node else detail  # the node that failed stays named
        return exit.model_copy(update={"oom_killed": resource_errors.is_out_of_memory(errors), "detail": detail})
    said = exit.detail or f"exited with status {exit.code}"
    last = last_line(tail)
    return exit.model_copy(update={"detail": f"{said}: {last[:200]}" if last else said})


@dataclass(frozen=True, kw_only=True)
class JobOutcome:
    """A job's end: how it exited, whether mltrain stopped it at its limit, whether its output was
    kept whole, how long it took, and the log it printed."""

    job_id: str
    exit: Exit
    """As the runner saw it (code None: not seen)."""
    timed_out: bool
    """mltrain stopped it at its wall-clock limit."""
    lost: str
    """Why its output is not whole or its end was not seen ('' when all is well): then nothing it
    printed can be trusted to be complete."""
    seconds: float
    log: Path
    """Everything it printed, as it arrived."""
    leftovers: tuple[str, ...] = ()
    """Processes it left running after it ended, which were stopped (a daemon outliving its job)."""

    def leftover_note(self) -> str:
        """One line saying what the job left running, '' when nothing."""
        if not self.leftovers:
            return ""
        count = len(self.leftovers)
        return (f"job {self.job_id} left {count} process{'es' * (count != 1)} running after it ended, stopped: "
                f"{', '.join(self.leftovers[:5])}{' ...' if count > 5 else ''}")

    @property
    def ok(self) -> bool:
        return self.exit.code == 0 and not self.timed_out and not self.lost

    @property
    def refused(self) -> bool:
        """It exited 2 on its own, whole: the contract's "bad input" (the settings it was given, not the
        node, are at fault)."""
        return self.exit.code == EXIT_USAGE and not self.timed_out and not self.lost

    def text(self) -> str:
        """The whole log."""
        try:
            return self.log.read_text(errors="replace")
        except OSError:
            return ""

    def tail(self, size: int = TAIL_BYTES) -> str:
        return read_tail(self.log, size)

    def last_line(self) -> str:
        """The last line the job printed ('' when it printed none)."""
        return last_line(self.tail(LAST_LINE_BYTES))

    def explained_exit(self) -> Exit:
        """The exit with the resource errors or last line of the output (`explain_exit`)."""
        return explain_exit(self.exit, self.tail())

    def why(self) -> str:
        """How the job ended, in one line: its output lost, its limit reached, or its exit explained."""
        if self.lost:
            return self.lost
        if self.timed_out:
            return f"timed out after {self.seconds:.0f} s"
        return self.explained_exit().detail or f"exited with status {self.exit.code}"
