"""The quorum: a number that fails its reference is measured again before it FAILs the node. A probe
double slow once and then normal PASSes after the repeat; slow every time it FAILs; health faults
and wrong results are never repeated away; repeats that cannot measure leave it INCONCLUSIVE."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from orchestrator.errors import EXIT_INVALID_RESULT, EXIT_OK
from orchestrator.qualify import quorum
from orchestrator.qualify.catalog import default_registry
from orchestrator.qualify.config import HistoryPolicy, QuorumPolicy
from orchestrator.qualify.judge import judge_check, node_verdict
from orchestrator.qualify.references import References
from orchestrator.render.junit import junit_xml
from orchestrator.render.qualification import verdict_lines
from orchestrator.results.qualification import CheckResult, Measurement, Reference, Status
from tests.qualify.nodes import probe_source, run_node

METRIC = "gemm_fp32_256x256x256"
REF = Reference(value=100, lower=90, upper=None, unit="TFLOP/s", kind="operator", source="refs.yaml: acceptance")
REFS = References(operator={METRIC: REF})
CHECKS = default_registry()


def gemm(value: float | None, sanity: Status = Status.PASS, name: str = "gemm") -> CheckResult:
    """The probe's gemm check as it comes back unjudged: one number, or none (it could not run)."""
    if value is None:
        return CheckResult(name=name, kind="microbenchmark", status=Status.INCONCLUSIVE, sanity=Status.INCONCLUSIVE,
                           reasons=("the probe did not start: exit status 1",))
    reasons = ("gemm_fp16_256x256x256: wrong result (max error 3.1)",) if sanity is Status.FAIL else ()
    return CheckResult(name=name, kind="microbenchmark", status=sanity, sanity=sanity, reasons=reasons,
                       sanity_reasons=reasons, measurements=(Measurement(metric=METRIC, value=value, unit="TFLOP/s"),))


class Probe:
    """A probe double: the readings of each run in turn (the last repeats); counts its runs."""

    def __init__(self, readings: Sequence[float | None | CheckResult]) -> None:
        self.readings = list(readings)
        self.asked: list[tuple[tuple[str, ...], int]] = []

    def __call__(self, names: tuple[str, ...], attempt: int) -> list[CheckResult]:
        self.asked.append((names, attempt))
        reading = self.readings[min(attempt, len(self.readings) - 1)]
        return [reading if isinstance(reading, CheckResult) else gemm(reading)]


def decide(probe: Probe, policy: QuorumPolicy = QuorumPolicy(), first: CheckResult | None = None) -> CheckResult:
    first = first if first is not None else gemm(probe.readings[0])  # type: ignore[arg-type]
    (check,) = quorum.confirm([first], lambda c: judge_check(c, REFS, HistoryPolicy()), probe, policy,
                              repeatable=CHECKS.repeatable)
    return check


def test_slow_once_then_normal_passes_after_one_repeat():
    probe = Probe([50.0, 100.0, 100.0])
    check = decide(probe)
    (m,) = check.measurements
    assert check.status is Status.PASS and m.status is Status.PASS and m.value == 100.0
    assert m.quorum is not None
    assert (m.quorum.first, m.quorum.repeats, m.quorum.outcome) == (50.0, (100.0,), "overturned")
    assert probe.asked == [(("gemm",), 1)]  # decided after one repeat: two of two could no longer fail


def test_slow_every_time_fails_with_every_value_in_the_reason():
    probe = Probe([50.0, 51.0, 49.0])
    check = decide(probe)
    (m,) = check.measurements
    assert check.status is Status.FAIL and m.value == 50.0
    assert m.quorum is not None and (m.quorum.repeats, m.quorum.below, m.quorum.needed) == ((51.0, 49.0), 2, 2)
    assert m.reason == ("gemm_fp32_256x256x256 50 TFLOP/s below the lower bound 90 (operator reference 100 TFLOP/s:"
                        " refs.yaml: acceptance); measured again: first 50 TFLOP/s, then 51, 49: 2 of 2 repeat(s)"
                        " failed too (2 needed): FAIL confirmed")
    assert len(probe.asked) == 2


def test_slow_then_normal_then_slow_passes_by_majority_and_fails_when_all_are_asked_for():
    assert decide(Probe([50.0, 100.0, 50.0])).status is Status.PASS
    three = QuorumPolicy(repeats=3)  # majority of three: two
    assert decide(Probe([50.0, 50.0, 100.0, 50.0]), three).status is Status.FAIL
    assert decide(Probe([50.0, 100.0, 100.0, 50.0]), three).status is Status.PASS
    strict = QuorumPolicy(repeats=3, rule="all")
    probe = Probe([50.0, 50.0, 50.0, 100.0])
    assert decide(probe, strict).status is Status.PASS and len(probe.asked) == 3


def test_no_repeats_leaves_the_first_reading_to_decide():
    probe = Probe([50.0, 100.0])
    check = decide(probe, QuorumPolicy(repeats=0))
    assert check.status is Status.FAIL and check.measurements[0].quorum is None and probe.asked == []


def test_repeats_that_cannot_measure_leave_it_inconclusive():
    check = decide(Probe([50.0, None, None]))
    (m,) = check.measurements
    assert m.status is Status.INCONCLUSIVE and check.status is Status.INCONCLUSIVE
    assert m.quorum is not None and m.quorum.repeats == (None, None) and "could not measure it" in m.reason
    assert node_verdict([check], CHECKS.passive)[0] is Status.INCONCLUSIVE


def test_a_wrong_result_in_a_repeat_fails_the_check():
    check = decide(Probe([50.0, gemm(100.0, sanity=Status.FAIL)]))
    assert check.status is Status.FAIL and check.sanity is Status.FAIL
    assert check.reasons[0] == "repeat 1: gemm_fp16_256x256x256: wrong result (max error 3.1)"


def test_health_faults_and_wrong_results_are_never_repeated():
    lost = CheckResult(name="gpu_health", kind="health", status=Status.FAIL, sanity=Status.FAIL,
                       reasons=("GPU1: GPU is lost",))
    wrong = gemm(50.0, sanity=Status.FAIL)
    probe = Probe([100.0])
    checks = quorum.confirm([lost, wrong], lambda c: judge_check(c, REFS, HistoryPolicy()), probe, QuorumPolicy(),
                            repeatable=CHECKS.repeatable)
    assert [c.status for c in checks] == [Status.FAIL, Status.FAIL] and probe.asked == []


# ---------------------------------------------------------------- a whole node, a probe double


def flaky_probe(counter: Path, slow_runs: int) -> str:
    """A stand-in probe whose gemm reads 50 TFLOP/s on its first ``slow_runs`` runs, 100 after;
    ``counter`` counts its runs."""
    rate = (f"import pathlib\n_c = pathlib.Path({str(counter)!r})\n_n = int(_c.read_text()) if _c.exists() else 0\n"
            f"_c.write_text(str(_n + 1))\nRATE = 50.0 if _n < {slow_runs} else 100.0\n")
    source = probe_source({METRIC: 100.0}, seconds=0.05, extra=rate)
    return source.replace(f"emit_result('gemm', {METRIC!r}, 100.0,", f"emit_result('gemm', {METRIC!r}, RATE,")


def references(tmp_path: Path) -> Path:
    path = tmp_path / "refs.yaml"
    path.write_text("systems:\n  - model: '*'\n    source: acceptance runs of the test node\n    references:\n"
                    f"      {METRIC}: [100.0, -0.1, null, TFLOP/s]\n")
    return path


def qualified(mltrain_env, tmp_path: Path, slow_runs: int):
    counter = tmp_path / "probe-runs"
    record = run_node(tmp_path / "r", probe=flaky_probe(counter, slow_runs), references=references(tmp_path))
    check = record.check("gemm")
    assert check is not None
    return record, check, int(counter.read_text())


def test_a_node_whose_probe_is_slow_once_passes_after_the_repeat(mltrain_env, tmp_path: Path):
    record, check, runs = qualified(mltrain_env, tmp_path, slow_runs=1)
    m = next(m for m in check.measurements if m.metric == METRIC)
    assert runs == 2 and record.verdict is Status.PASS and record.exit_code == EXIT_OK, record.reasons
    assert m.value == 100.0 and m.quorum is not None and m.quorum.first == 50.0 and m.quorum.repeats == (100.0,)
    folder = tmp_path / "r" / "qualify" / "nodes" / "testnode" / record.qualification_id
    assert (folder / "repeat-1" / "probe").is_dir()
    shown = "\n".join(verdict_lines(record))
    assert "gemm: gemm_fp32_256x256x256: measured again: first 50 TFLOP/s, then 100: 0 of 1 repeat(s)" in shown
    assert "measured again: first 50 TFLOP/s" in junit_xml([record])
    assert json.loads(json.dumps(record.to_json()))["checks"][record.checks.index(check)]["measurements"][0][
        "quorum"]["outcome"] == "overturned"


def test_a_node_whose_probe_is_slow_every_time_fails(mltrain_env, tmp_path: Path):
    record, check, runs = qualified(mltrain_env, tmp_path, slow_runs=99)
    assert runs == 3 and record.verdict is Status.FAIL and record.exit_code == EXIT_INVALID_RESULT
    assert record.reasons[0].startswith("gemm: gemm_fp32_256x256x256 50 TFLOP/s below the lower bound 90")
    assert record.reasons[0].endswith("measured again: first 50 TFLOP/s, then 50, 50: 2 of 2 repeat(s) failed too"
                                      " (2 needed): FAIL confirmed")

