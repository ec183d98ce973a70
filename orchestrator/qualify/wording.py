"""The words of qualification verdicts, in the qualify room because its judge writes them into
records; shared by the reasons (`qualify.judge`), the terminal, JUnit and the CLI help: the exit code
of each verdict, a re-measured number, a drifting one."""

from __future__ import annotations

from orchestrator.errors import EXIT_USAGE
from orchestrator.qualify.config import DriftPolicy
from orchestrator.qualify.drift import Fall
from orchestrator.results.qualification import VERDICT_EXIT_CODES, Quorum, Status
from orchestrator.text import number

MEANING = {
    Status.PASS: "every check passed, on the node's GPUs (or on a CPU-only node declared so: --expect-gpus 0)",
    Status.WARN: "passed with a warning (a drift, a regression, a suspect reference, no GPU found where none was"
                 " expected); qualify.yaml warn_exit_code: 0 to exit 0",
    Status.FAIL: "a check failed (health, a wrong result, the GPU's own error, a number below its reference on a"
                 " quorum of repeats), or GPUs the node is expected to have were not found",
    Status.INCONCLUSIVE: "could not measure (a tool missing, a probe or the workload crashed, a check hung, the"
                         " runner refused, the suite's sizes too large for the node, a number outside its sane"
                         " range, or nothing was measured)",
}


def exit_code_table() -> list[tuple[int, str, str]]:
    """(exit code, verdict, meaning), by code, 2 included: what `mltrain qualify` exits with."""
    rows = [(code, status.word, MEANING[status]) for status, code in VERDICT_EXIT_CODES.items()]
    rows.append((EXIT_USAGE, "-", "bad input or usage: nothing was qualified"))
    return sorted(rows)


def exit_code_help() -> str:
    """One line for --help: "PASS 0, FAIL 1, bad input 2, ..."."""
    return ", ".join(f"{'bad input' if word == '-' else word} {code}" for code, word, _ in exit_code_table())


def quorum_note(q: Quorum, unit: str) -> str:
    """How a number that failed its first reading fared when measured again."""
    seen = ", ".join("-" if v is None else number(v) for v in q.repeats)
    count = len(q.repeats)
    head = f"measured again: first {number(q.first)} {unit}, then {seen}: {q.below} of {count} repeat(s) failed too"
    if q.outcome == "confirmed":
        return f"{head} ({q.needed} needed): FAIL confirmed"
    if q.outcome == "overturned":
        return f"{head} ({q.needed} needed): not confirmed, judged on the median of the passing repeats"
    return f"{head}, {sum(v is None for v in q.repeats)} could not measure it ({q.needed} needed): inconclusive"


def drift_note(named: str, value: float, unit: str, fall: Fall, policy: DriftPolicy) -> str:
    """A number inside its bounds that has been falling night after night."""
    c = fall.cusum
    since = fall.since[:10]
    return (f"{named} {number(value)} {unit} is drifting: {fall.fall:.1%} worse than its baseline {number(c.baseline)}"
            f" (median of its first {policy.baseline_runs} nights), over {fall.nights} nights since {since}"
            f" (CUSUM {c.total:.1%} > {policy.threshold_sigma:g} x its night-to-night noise {c.sigma:.1%};"
            f" Page 1954); still inside its bounds")
