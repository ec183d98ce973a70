"""Compliance of every run: mlperf_logging's compliance checker on each seed's log as it finishes,
and on each imported file.

The checker runs as the result summarizer runs it, so that a file counts the way the summarizer
counts it, with one rule held more strictly: a ``run_start`` or ``run_stop`` logged more than once
(which the checker only warns about when the repeats carry the same value) makes the run
non-compliant, since its time-to-train is then undefined.

Profiles other than ``mlperf`` deliberately change some rules: their own quality target, and a
synthetic dataset whose size is not the benchmark's. Only those rules are relaxed, and each
relaxation is recorded in the run's record.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mlperf_logging.mllog import constants as C

from orchestrator.config.profiles import MLPERF
from orchestrator.mlperf import checkers, mllog
from orchestrator.mlperf.quality import Goal
from orchestrator.results.records import Compliance, RunRecord, RunStatus

STRICT_KEYS = (C.RUN_START, C.RUN_STOP)
"""Keys whose repetition the summarizer tolerates and mltrain does not."""
DATASET_KEYS = (C.TRAIN_SAMPLES, C.EVAL_SAMPLES)


@dataclass(frozen=True, kw_only=True)
class Relaxation:
    """The rules a profile deliberately changes."""

    profile: str
    target: float | None = None
    """The profile's quality target, where it differs from the benchmark's."""
    synthetic_data: bool = False
    """The profile trains on a synthetic dataset (its size is not the benchmark's)."""


def relaxation_for(profile: str, *, target: float, reference_target: float, synthetic_data: bool) -> Relaxation | None:
    """What a profile relaxes: nothing for ``mlperf``; else its own target and its synthetic data."""
    if profile == MLPERF:
        return None
    relaxed = Relaxation(profile=profile, target=target if target != reference_target else None,
                         synthetic_data=synthetic_data)
    return relaxed if relaxed.target is not None or relaxed.synthetic_data else None


def check_log(path: Path, ruleset: str, goal: Goal, relax: Relaxation | None = None) -> Compliance:
    """The compliance checker's verdict on one log, with the profile's relaxations (the target rule
    is the one on ``goal``'s metric written with its direction, ``>=`` or ``<=``)."""
    report = checkers.compliance(path, ruleset)
    errors = list(report.errors)
    relaxed: list[str] = []
    if relax is not None and relax.target is not None:
        target_rules = [e for e in errors if e.startswith(f"Failed checks for {goal.metric} :") and goal.operator in e]
        for rule in target_rules:
            errors.remove(rule)
            check = rule.split(":", 1)[1].strip()
            relaxed.append(f"quality target: the rule `{check}` is not applied; the {relax.profile} profile's"
                           f" target is {relax.target:g}")
    if relax is not None and relax.synthetic_data:
        for key in DATASET_KEYS:
            message = report.errors_by_key.get(key)
            if message is not None and message in errors:
                errors.remove(message)
                test = message.split("failed test:", 1)[-1].strip()
                relaxed.append(f"dataset size: the rule `{test}` for {key} is not applied ({relax.profile} profile,"
                               f" synthetic data)")
    for key in STRICT_KEYS:
        if key in report.warnings_by_key:
            errors.insert(0, report.warnings_by_key[key])
    reason = errors[0] if errors else ""
    if len(errors) > 1:
        reason += f" (and {len(errors) - 1} more)"
    return Compliance(ruleset=ruleset, valid=not errors, reason=reason, relaxed=tuple(relaxed))


def judge(record: RunRecord, verdict: Compliance) -> RunRecord:
    """The record with the verdict kept; a converged run whose log breaks the rules is not scored
    (NON_COMPLIANT, the checker's reason). Runs that did not converge keep why they did not."""
    if verdict.valid or record.status is not RunStatus.CONVERGED:
        return record.model_copy(update={"compliance": verdict})
    return record.model_copy(update={
        "compliance": verdict, "status": RunStatus.NON_COMPLIANT,
        "reason": f"not compliant ({verdict.ruleset}): {verdict.reason}",
    })


def check_seed(record: RunRecord, log: Path, *, profile: str, goal: Goal, reference_target: float,
               synthetic_data: bool, ruleset: str) -> RunRecord:
    """A finished seed's record judged by the compliance checker of ``ruleset`` on its log (``goal``:
    the profile's target). Seeds that never logged a whole run (crashed, killed, timed out: no
    run_stop) keep their status unchecked."""
    if record.run_start_ms is None or record.run_stop_ms is None or not log.is_file():
        return record
    overlong = _overlong_mllog_line(log)
    if overlong is not None:  # mlperf_logging's reader would spend minutes on it: judged here
        return judge(record, Compliance(ruleset=ruleset, valid=False, reason=f"line {overlong}: an MLLOG line longer"
                                        f" than {mllog.MAX_LINE_CHARS:,} characters (not checked)"))
    relax = relaxation_for(profile, target=goal.target, reference_target=reference_target,
                           synthetic_data=synthetic_data)
    return judge(record, check_log(log, ruleset, goal, relax))


def _overlong_mllog_line(log: Path) -> int | None:
    """The number of the first MLLOG line of ``log`` longer than the reader takes, if any."""
    for error in mllog.parse_file(log).bad_values:
        if error.problem.startswith("an MLLOG line of"):
            return error.line
    return None
