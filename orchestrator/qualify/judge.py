"""Verdicts: each measurement against its reference, each check from its sanity and its numbers,
the node from its checks, and the exit code from the node.

A measurement outside its bounds on the bad side FAILs; outside on the good side WARNs (the
reference or the measurement is wrong); worse than the rolling median of the node's passing runs
by more than `regression_pct` WARNs even inside the bounds, and so does one whose nightly series has
been falling (`drift`). A FAIL re-measured by the quorum (`quorum`) says so, and stays FAIL only
where the repeats confirmed it (INCONCLUSIVE where they could not measure it). Every reason names
the metric (and the GPU that measured it, where it is one GPU's), the value, the bound and the
reference's source.
"""

from __future__ import annotations

from collections.abc import Collection

from orchestrator.errors import EXIT_INVALID_RESULT
from orchestrator.qualify.config import HistoryPolicy
from orchestrator.qualify.drift import Drift
from orchestrator.qualify.expected import GpuFinding
from orchestrator.qualify.references import References
from orchestrator.qualify.wording import drift_note, quorum_note
from orchestrator.results.qualification import (
    VERDICT_EXIT_CODES,
    CheckResult,
    Measurement,
    Reference,
    Status,
    worst,
)
from orchestrator.text import number


def judge_measurement(
    m: Measurement, reference: Reference | None, rolling: Reference | None, policy: HistoryPolicy,
    drift: Drift | None = None,
) -> Measurement:
    median = rolling.value if rolling is not None else None
    status, reason = Status.PASS, ""
    if reference is not None and reference.unit != m.unit:
        status = Status.WARN
        reason = (f"{_named(m)}: reference unit {reference.unit} differs from the measured {m.unit}; not judged"
                  f" ({reference.kind} reference: {reference.source})")
    elif reference is not None:
        status, reason = _against_bounds(m, reference)
    else:  # no bounds: neither passed nor failed, and said so
        status = Status.UNJUDGED
        reason = (f"{_named(m)} {number(m.value)} {m.unit}: unjudged (no operator reference, no floor for this"
                  f" device, too few passing runs of this node to learn one)")
    if status in (Status.PASS, Status.UNJUDGED) and median is not None and median != 0:
        worse = (median - m.value) / abs(median) if m.better == "higher" else (m.value - median) / abs(median)
        if worse * 100 > policy.regression_pct:
            status = Status.WARN
            reason = (f"{_named(m)} {number(m.value)} {m.unit} is {worse:.1%} worse than its rolling median"
                      f" {number(median)} (inside the bounds; {rolling.source})")  # type: ignore[union-attr]
    fall = drift.fall(m) if drift is not None and status is not Status.FAIL else None
    if fall is not None:
        note = drift_note(_named(m), m.value, m.unit, fall, drift.policy)  # type: ignore[union-attr]
        status, reason = Status.WARN, f"{reason}; {note}" if reason else note
    if m.quorum is not None and m.quorum.outcome != "overturned":
        if m.quorum.outcome == "inconclusive" and status is Status.FAIL:
            status = Status.INCONCLUSIVE
        reason = f"{reason}; {quorum_note(m.quorum, m.unit)}"
    return m.model_copy(update={"reference": reference, "rolling_median": median, "status": status, "reason": reason})


def _named(m: Measurement) -> str:
    """The metric, and the GPU that measured it where it is one GPU's."""
    return f"{m.metric} on {m.device}" if m.device else m.metric


def _against_bounds(m: Measurement, ref: Reference) -> tuple[Status, str]:
    value = f"{_named(m)} {number(m.value)} {m.unit}"
    source = f"{ref.kind} reference {number(ref.value)} {ref.unit}: {ref.source}"
    if ref.lower is not None and m.value < ref.lower:
        status = Status.FAIL if m.better == "higher" else Status.WARN
        advice = "" if status is Status.FAIL else "; better than expected: check the reference or the measurement"
        return status, f"{value} below the lower bound {number(ref.lower)} ({source}){advice}"
    if ref.upper is not None and m.value > ref.upper:
        status = Status.FAIL if m.better == "lower" else Status.WARN
        advice = "" if status is Status.FAIL else "; better than expected: check the reference or the measurement"
        return status, f"{value} above the upper bound {number(ref.upper)} ({source}){advice}"
    return Status.PASS, ""


def judge_check(
    check: CheckResult, references: References, policy: HistoryPolicy, drift: Drift | None = None,
) -> CheckResult:
    """The check with every measurement judged (against the reference `References.pick` gives it) and
    its status made of sanity and numbers, sanity first (ReFrame's order): a check that could not run
    or does not apply keeps that status whatever its numbers; a sanity FAIL (a wrong result: its number
    is no measurement, `micro`) stays FAIL whatever the others' speed, its reasons first; a right
    result's number is judged against its reference, and a slow one fails on performance alone (its
    ``sanity`` stays PASS)."""
    judged = tuple(judge_measurement(m, references.pick(m), references.rolling(m), policy, drift)
                   for m in check.measurements)
    if check.sanity in (Status.INCONCLUSIVE, Status.NOT_APPLICABLE):
        return check.model_copy(update={"measurements": judged, "status": check.sanity})
    statuses = [check.status, *(m.status for m in judged)]
    reasons = [(check.status, r) for r in check.reasons] + [(m.status, m.reason) for m in judged
                                                            if m.reason and m.status is not Status.UNJUDGED]
    reasons.sort(key=lambda item: -item[0].rank)
    return check.model_copy(update={
        "measurements": judged, "status": worst(statuses), "reasons": tuple(r for _, r in reasons),
    })


def node_verdict(checks: list[CheckResult], passive: Collection[str],
                 gpus: GpuFinding | None = None) -> tuple[Status, tuple[str, ...]]:
    """FAIL if a check failed, else INCONCLUSIVE if one could not measure, else WARN, else PASS; the
    reasons of the checks that made it, most severe first, each prefixed with its check.

    A node where nothing was measured is INCONCLUSIVE, never PASS: an empty suite, every check not
    applicable, only ``passive`` checks passed (they read the node's state and load nothing: NVML's
    health: those the registry declares so). Nor is a node whose GPUs could not be
    qualified (``gpus``, `expected.gpu_finding`): WARN where none was found, FAIL where some were
    expected."""
    verdict, reasons = _verdict(checks, passive)
    if gpus is None:
        return verdict, reasons
    if gpus.status.rank >= verdict.rank:
        return gpus.status, (gpus.reason, *reasons)
    return verdict, (*reasons, gpus.reason)


def _verdict(checks: list[CheckResult], passive: Collection[str]) -> tuple[Status, tuple[str, ...]]:
    verdict = worst([c.status for c in checks])
    if verdict is Status.NOT_APPLICABLE:
        verdict = Status.PASS
    reasons = [(c.status, f"{c.name}: {r}") for c in checks
               if c.status in (Status.FAIL, Status.INCONCLUSIVE, Status.WARN) for r in c.reasons]
    reasons.sort(key=lambda item: -item[0].rank)
    found = tuple(r for _, r in reasons)
    measured = [c for c in checks if c.status in (Status.PASS, Status.WARN) and c.name not in passive]
    if verdict in (Status.PASS, Status.WARN) and not measured:
        skipped = "; ".join(f"{c.name}: {c.reason}" for c in checks if c.status is Status.NOT_APPLICABLE and c.reason)
        why = "nothing was measured: " + (f"every check was not applicable ({skipped})" if skipped else
                                          "the suite runs no check here" if not checks else
                                          "only the node's state was read, nothing ran on it")
        return Status.INCONCLUSIVE, (why, *found)
    return verdict, found


def exit_code(verdict: Status, *, strict: bool, warn_exit_code: int = VERDICT_EXIT_CODES[Status.WARN]) -> int:
    """The verdict's own code (`VERDICT_EXIT_CODES`: PASS 0, FAIL 1, INCONCLUSIVE 3, WARN 4); a WARN
    exits ``warn_exit_code`` (qualify.yaml), and 1 as a FAIL does under ``strict``. Never 0 unless
    it passed (or a WARN was configured to)."""
    if verdict is Status.WARN:
        return EXIT_INVALID_RESULT if strict else warn_exit_code
    return VERDICT_EXIT_CODES[verdict]
