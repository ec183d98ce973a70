"""What a check is to the node that runs it: its declaration and one call, ``run(context)``, which
gives its unjudged `CheckResult` (sanity apart from numbers; the numbers are judged later, against
references, by `judge`). `run_check` is the one way a node runs a check: what it needs first (where
it is missing, the check is not applicable, saying what), then the check within its timeout.

A check stops itself at its timeout where it runs a job (the job's limit, the probe's watchdog); a
check that runs in mltrain's own process (NVML reads, which can hang in the driver) runs in a thread
that is given up at its timeout (`in_thread`). Either way a check that hangs is INCONCLUSIVE, named
with its timeout (`overran`), and the others still run.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, TypeVar

from orchestrator import text
from orchestrator.results.qualification import CheckResult, Status
from orchestrator.runners import resource_errors
from orchestrator.runners.outcome import JobOutcome

if TYPE_CHECKING:
    from orchestrator.qualify.checks.context import NodeContext
    from orchestrator.qualify.checks.declaration import Declaration

T = TypeVar("T")


class NodeCheck(Protocol):
    """A check a node runs (`Declaration.runs`: node, probe or job)."""

    declaration: Declaration

    def run(self, ctx: NodeContext) -> CheckResult: ...


LEFTOVERS = "leftovers"
"""The fact of a check whose job left processes running after it ended (the runner stopped them):
what `JobOutcome.leftover_note` said; the node says it once, as a warning, not a verdict."""


def refused_the_suite(what: str, outcome: JobOutcome) -> str:
    """The INCONCLUSIVE reason of a check's job that exited 2 on its own: the suite's settings, not the
    node, are at fault; what the job said last follows (its log's tail read once)."""
    said = outcome.last_line()
    return f"{what} refused the suite's settings (exit 2)" + (f": {said[:200]}" if said else "")


def job_facts(outcome: JobOutcome) -> dict[str, str]:
    """The facts every check that runs a job records of it: its output, and what it left running."""
    facts = {"output": str(outcome.log)}
    if outcome.leftovers:
        facts[LEFTOVERS] = outcome.leftover_note()
    return facts


def failed_job(outcome: JobOutcome, what: str, *, overran_why: str, settings: str, no_number: str
               ) -> tuple[Status, str]:
    """How a check whose job failed (or exited 0 without its number: ``no_number``) is judged, one rule
    for every check that runs a workload's or a harness's code: FAIL only where its output shows the
    GPU's own error (an Xid, ECC, a lost device, CUDA, NCCL: `resource_errors.gpu_faults`);
    INCONCLUSIVE for the rest, which says nothing about the node: a hang (``overran_why``), the suite's
    settings refused (exit 2) or more memory than the node has (``settings`` named), the code's own
    crash (a Python exception), no number."""
    if outcome.timed_out:
        return Status.INCONCLUSIVE, overran_why
    if outcome.refused:
        return Status.INCONCLUSIVE, refused_the_suite(what, outcome)
    errors = resource_errors.classify(outcome.tail())
    if not outcome.ok and resource_errors.gpu_faults(errors):
        return Status.FAIL, f"{what}: {outcome.why()}"
    if outcome.exit.oom_killed or resource_errors.is_out_of_memory(errors):
        return Status.INCONCLUSIVE, (f"{what}: {outcome.why()}: the suite's {settings} ask more memory than this"
                                     " node has: lower them in qualify.yaml")
    if outcome.ok:
        return Status.INCONCLUSIVE, no_number
    return Status.INCONCLUSIVE, (f"{what} failed in its own code, which says nothing about the node (no GPU error"
                                 f" in its output): {outcome.why()}")


def leftover_warnings(checks: list[CheckResult]) -> list[str]:
    """One warning per job that left processes running, naming the checks it ran (a probe job runs several)."""
    named: dict[str, list[str]] = {}
    for check in checks:
        note = check.facts.get(LEFTOVERS)
        if isinstance(note, str) and note:
            named.setdefault(note, []).append(check.name)
    return [f"warning: {note} (checks: {', '.join(names)})" for note, names in named.items()]


def overran(name: str, seconds: float, what: str = "") -> str:
    """The reason of a check stopped at its timeout."""
    limit = text.duration(seconds * 1000)
    return f"{name} did not finish within its {limit} timeout{what}: stopped, the other checks ran on"


class Overran(Exception):
    """A check ran past its timeout."""

    def __init__(self, name: str, seconds: float) -> None:
        super().__init__(overran(name, seconds))
        self.name, self.seconds = name, seconds


def in_thread(run: Callable[[], T], *, name: str, timeout_s: float) -> T:
    """``run()`` in a thread of its own, given up after ``timeout_s`` (`Overran`): a call that hangs
    in a driver cannot be interrupted, but the qualification goes on without it. A stop signal still
    reaches the main thread, which waits here."""
    box: dict[str, object] = {}

    def target() -> None:
        try:
            box["value"] = run()
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread, which raises it
            box["error"] = exc

    thread = threading.Thread(target=target, name=f"qualify-{name}", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        raise Overran(name, timeout_s)
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["value"]  # type: ignore[return-value]


def result(declaration: Declaration, status: Status, reasons: list[str] | tuple[str, ...], **extra: object
           ) -> CheckResult:
    """A check's result whose sanity is its status (it could not run, does not apply, or failed its sanity)."""
    return CheckResult(name=declaration.name, kind=declaration.kind, status=status, sanity=status,
                       reasons=tuple(reasons), sanity_reasons=tuple(reasons), **extra)  # type: ignore[arg-type]


def unmet(declaration: Declaration, ctx: NodeContext) -> str:
    """Why this node cannot run the check ("" when it can). A probe check's needs are the probe's to
    judge, where it runs (the device it finds)."""
    needs = declaration.needs
    if declaration.runs == "probe":
        return ""
    if needs.runners and ctx.runner.name not in needs.runners:
        return f"{declaration.name} runs on the {' or '.join(needs.runners)} runner, not {ctx.runner.name}"
    if needs.data and ctx.plan.data is None:
        return f"{declaration.name} needs the dataset's folder: give it with --data"
    if needs.gpus and ctx.health.gpu_count < needs.gpus:
        wanted = "a GPU" if needs.gpus == 1 else f"{needs.gpus} or more GPUs"
        return f"{declaration.name} needs {wanted}; NVML sees {ctx.health.gpu_count} here"
    if needs.device == "cuda" and ctx.kind != "cuda":
        return f"{declaration.name} needs a CUDA device; the checks ran on the CPU"
    return ""


def sane(found: CheckResult, declaration: Declaration) -> CheckResult:
    """``found`` without the numbers its declaration's sanity rule says are none (`Declaration.insane`:
    -100 samples/s, 0 GFLOP/s): each named, and the check INCONCLUSIVE unless it failed already (a
    wrong result stays a FAIL). A number no device can give says nothing of the node, and is never
    judged, never passed."""
    why = [(m, declaration.insane(m.metric, m.value, m.unit)) for m in found.measurements]
    bad = [reason for _, reason in why if reason]
    if not bad:
        return found
    kept = tuple(m for m, reason in why if not reason)
    status = found.status if found.status is Status.FAIL else Status.INCONCLUSIVE
    sanity = found.sanity if found.sanity is Status.FAIL else Status.INCONCLUSIVE
    return found.model_copy(update={"status": status, "sanity": sanity, "measurements": kept,
                                    "reasons": (*found.reasons, *bad), "sanity_reasons": (*found.sanity_reasons, *bad)})


def run_check(check: NodeCheck, ctx: NodeContext) -> CheckResult:
    """One check on this node: not applicable where its needs are unmet, else run within its timeout
    (INCONCLUSIVE, named, where it overran); its wall time in the timings."""
    declaration = check.declaration
    why = unmet(declaration, ctx)
    if why:
        return result(declaration, Status.NOT_APPLICABLE, [why])
    quiet = declaration.runs == "probe"  # the probe says its own progress, check by check
    if not quiet:
        ctx.watch.status(f"{'  repeat ' + str(ctx.attempt) + ': ' if ctx.repeat else ''}{declaration.name} ...")
    started = time.monotonic()
    try:
        if declaration.runs == "node":  # in mltrain's process: a call that hangs is given up at the timeout
            limit = declaration.timeout(ctx.settings(declaration))
            found = in_thread(lambda: check.run(ctx), name=declaration.name, timeout_s=limit)
        else:  # its job's own limit, or the probe's watchdog, stops it
            found = check.run(ctx)
    except Overran as exc:
        found = result(declaration, Status.INCONCLUSIVE, [str(exc)], duration_s=time.monotonic() - started)
    found = sane(found, declaration)
    if not quiet:
        if not ctx.repeat:
            ctx.watch.timings[declaration.name] = time.monotonic() - started
        ctx.watch.status(f"{declaration.name}: {found.status.word}" + (f" ({found.reason})" if found.reason else ""))
    return found
