"""The quorum: a performance number that failed its reference on its first reading is measured again
(up to `QuorumPolicy.repeats` times, stopping once decided) before it FAILs the node, so that a
noisy minute does not drain a healthy node.

Only numbers are repeated: a measurement that FAILed while its check's results were right, of a check
whose declaration lets the quorum repeat it (`Declaration.repeat`: the microbenchmarks, the workload's
throughput, inference). A health fault (a lost GPU, an ECC error), a wrong result, a check that could
not run, and time-to-train are never repeated. A repeat that finds a wrong result
or a health fault makes the check FAIL on it. The number then:

    FAILs (confirmed)      when at least `needed` repeats fail too; its first value is kept;
    is judged again        on the median of the passing repeats when enough passed that `needed`
      (overturned)         can no longer be reached (a PASS after the repeat, or a WARN);
    is INCONCLUSIVE        when too few repeats could measure it to decide either way.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field

from orchestrator.qualify.config import QuorumPolicy
from orchestrator.results.qualification import CheckResult, Measurement, Quorum, Remediation, Status, worst

Remeasure = Callable[[tuple[str, ...], int], list[CheckResult]]
"""Runs the named checks again (attempt 1, 2 ...) and returns them unjudged."""
Judge = Callable[[CheckResult], CheckResult]


@dataclass
class _Tally:
    first: float
    values: list[float | None] = field(default_factory=list)
    passed: list[float] = field(default_factory=list)
    below: int = 0

    def add(self, judged: Measurement | None) -> None:
        self.values.append(None if judged is None else judged.value)
        if judged is not None and judged.status is Status.FAIL:
            self.below += 1
        elif judged is not None:
            self.passed.append(judged.value)

    def outcome(self, policy: QuorumPolicy) -> str | None:
        """confirmed, overturned, or None while undecided."""
        if self.below >= policy.needed:
            return "confirmed"
        if len(self.passed) > policy.repeats - policy.needed:
            return "overturned"
        return None


def suspects(judged: Sequence[CheckResult], repeatable: Collection[str]) -> dict[tuple[str, str], float]:
    """(check, metric) -> first value of every number the quorum re-measures."""
    return {(c.name, m.metric): m.value for c in judged
            if c.name in repeatable and c.sanity is Status.PASS
            for m in c.measurements if m.status is Status.FAIL}


def confirm(
    raw: Sequence[CheckResult], judge: Judge, remeasure: Remeasure, policy: QuorumPolicy,
    status: Callable[[str], None] = lambda _: None, *, repeatable: Collection[str],
) -> list[CheckResult]:
    """The checks ``raw`` (unjudged) judged, each failing number of a ``repeatable`` check (the
    registry's `Registry.repeatable`) put to the quorum first."""
    judged = [judge(c) for c in raw]
    found = suspects(judged, repeatable)
    tallies = {key: _Tally(first) for key, first in found.items()} if policy.repeats else {}
    faults: dict[str, list[str]] = {}
    fixes: dict[str, list[Remediation]] = {}
    for attempt in range(1, policy.repeats + 1):
        pending = {key for key, tally in tallies.items() if tally.outcome(policy) is None}
        if not pending:
            break
        status(f"quorum {attempt}/{policy.repeats}: measuring {', '.join(sorted(m for _, m in pending))} again")
        again = {c.name: judge(c) for c in remeasure(tuple(sorted({name for name, _ in pending})), attempt)}
        for name, check in again.items():
            if check.sanity is Status.FAIL:
                faults.setdefault(name, []).extend(f"repeat {attempt}: {r}" for r in check.sanity_reasons)
                fixes.setdefault(name, []).extend(check.remediation)
        for name, metric in pending:
            check = again.get(name)
            found = next((m for m in check.measurements if m.metric == metric), None) if check else None
            tallies[(name, metric)].add(found)
    touched = {name for name, _ in tallies} | set(faults)
    return [judge(_decided(c, tallies, faults.get(c.name, []), policy, fixes.get(c.name, [])))
            if c.name in touched else j for c, j in zip(raw, judged, strict=True)]


def _decided(
    check: CheckResult, tallies: dict[tuple[str, str], _Tally], faults: list[str], policy: QuorumPolicy,
    fixes: list[Remediation] = (),  # type: ignore[assignment]
) -> CheckResult:
    """The unjudged check with each re-measured number as the quorum decided it, and the faults the
    repeats found (with what they ask for)."""
    measurements = []
    for m in check.measurements:
        tally = tallies.get((check.name, m.metric))
        if tally is None:
            measurements.append(m)
            continue
        outcome = tally.outcome(policy) or "inconclusive"
        value = statistics.median(tally.passed) if outcome == "overturned" else tally.first
        quorum = Quorum(first=tally.first, repeats=tuple(tally.values), below=tally.below, needed=policy.needed,
                        outcome=outcome)  # type: ignore[arg-type]
        measurements.append(m.model_copy(update={"value": value, "quorum": quorum}))
    update: dict[str, object] = {"measurements": tuple(measurements)}
    if faults:
        update.update(status=worst([check.status, Status.FAIL]), sanity=Status.FAIL,
                      reasons=(*check.reasons, *faults), sanity_reasons=(*check.sanity_reasons, *faults),
                      remediation=(*check.remediation, *fixes))
    return check.model_copy(update=update)
