"""References learned from a node's own passing runs: a node made slower on purpose WARNs or FAILs
against them; they are per hardware and software; and the judging rules themselves."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.errors import EXIT_INFRASTRUCTURE, EXIT_INVALID_RESULT, EXIT_OK, EXIT_WARN
from orchestrator.qualify.catalog import default_registry
from orchestrator.qualify.config import HistoryPolicy
from orchestrator.qualify.judge import exit_code, judge_measurement, node_verdict
from orchestrator.qualify.references import learned_references
from orchestrator.results.qualification import CheckResult, Measurement, Reference, Status

POLICY = HistoryPolicy(runs=10, min_runs=3, k_mad=4.0, floor_pct=3.0, regression_pct=2.0)
HOG = "import os\nfor _ in range(3):\n    os.fork()\nwhile True:\n    pass\n"
"""Eight busy processes beside the probe's GEMM threads: a 2-core node (shared with whatever else
runs on it) gives the GEMM a fraction of what it had while the references were learned. The suite's
GEMM takes 15 ms and more a call, longer than a scheduler's slice, so that every call is slowed: the
median of 1 ms calls, most of them run whole inside a slice, once passed beside the hog (CI, beside
another worker's tests)."""


def qualify(cli, results: Path, suite: str, *extra: str) -> dict:
    r = cli("qualify", "--suite", suite, "--results", str(results), "--node-name", "n1", "--json",
            "--expect-gpus", "0", *extra)  # a CPU node, declared so: it may PASS
    assert r.code in (EXIT_OK, EXIT_INVALID_RESULT, EXIT_WARN), r.err
    return json.loads(r.out)


def measurement(record: dict, metric: str) -> dict:
    return next(m for c in record["checks"] for m in c["measurements"] if m["metric"] == metric)


@pytest.mark.cpu_hog
def test_a_cpu_hog_beside_the_node_is_caught_by_its_learned_references(cli, tmp_path: Path):
    results = tmp_path / "r"
    for _ in range(3):
        learning = qualify(cli, results, "gemm_only")
        assert learning["verdict"] == "pass"
    hog = subprocess.Popen([sys.executable, "-c", HOG], start_new_session=True)
    try:
        slowed = qualify(cli, results, "gemm_only")
    finally:
        import os
        import signal

        os.killpg(hog.pid, signal.SIGKILL)
        hog.wait()
    gemm = measurement(slowed, "gemm_fp32_1024x1024x1024")
    assert gemm["reference"]["kind"] == "history" and "last 3 passing runs" in gemm["reference"]["source"]
    assert slowed["verdict"] in ("warn", "fail"), gemm
    assert gemm["status"] in ("warn", "fail")
    first = gemm["quorum"]["first"] if gemm["quorum"] else gemm["value"]  # the quorum re-measures a FAIL
    assert first < gemm["rolling_median"]
    reason = slowed["reasons"][0]
    assert reason.startswith("gemm: gemm_fp32_1024x1024x1024") and "passing runs" in reason


def test_a_slower_throughput_fails_against_history_and_a_small_regression_warns(cli, tmp_path: Path,
                                                                               monkeypatch: pytest.MonkeyPatch):
    results = tmp_path / "r"
    for rate in ("100", "101", "99", "100"):
        monkeypatch.setenv("FAKE_RATE", rate)
        assert qualify(cli, results, "throughput_only")["verdict"] == "pass"
    monkeypatch.setenv("FAKE_RATE", "60")
    r = cli("qualify", "--suite", "throughput_only", "--results", str(results), "--node-name", "n1",
            "--expect-gpus", "0")
    assert r.code == EXIT_INVALID_RESULT
    text = " ".join(r.out.split())
    assert "verdict: FAIL (exit 1)" in text
    assert "throughput_samples_per_s 60 samples/s below the lower bound 90" in text
    assert "(history reference 100 samples/s: median and MAD of the last 4 passing runs" in text
    monkeypatch.setenv("FAKE_RATE", "94")  # inside the bounds (a 10% floor: 90), 6% below the median
    record = qualify(cli, results, "throughput_only")
    m = measurement(record, "throughput_samples_per_s")
    assert m["status"] == "warn" and record["verdict"] == "warn" and record["exit_code"] == EXIT_WARN
    assert m["reason"].startswith("throughput_samples_per_s 94 samples/s is 6.0% worse than its rolling median 100"
                                  " (inside the bounds; median and MAD of the last 4 passing runs")


def test_learned_references_need_the_same_software(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    results = tmp_path / "r"
    for _ in range(3):
        qualify(cli, results, "throughput_only")
    record = qualify(cli, results, "throughput_only")
    assert measurement(record, "throughput_samples_per_s")["reference"]["kind"] == "history"
    record = qualify(cli, results, "gemm_only")  # another suite: other numbers, other software key
    assert record["system"]["history"].startswith("0 of the 3 passing runs")


def test_median_and_mad_with_a_floor():
    def record(value: float):
        from tests.qualify.test_outputs import make_record

        return make_record(value)

    history = [record(v) for v in (100.0, 102.0, 98.0, 100.0, 150.0)]
    ref = learned_references(history, POLICY)["throughput_samples_per_s"]
    assert ref.value == 100.0  # the median shrugs off the one outlier
    # MAD 2 x 1.4826 x k 4 = 11.86 beats the 3% floor
    assert ref.lower == pytest.approx(100 - 4 * 1.4826 * 2) and ref.upper == pytest.approx(100 + 4 * 1.4826 * 2)
    flat = learned_references([record(50.0)] * 3, POLICY)["throughput_samples_per_s"]
    assert (flat.lower, flat.upper) == (pytest.approx(48.5), pytest.approx(51.5))  # MAD 0: the floor


@pytest.mark.parametrize(("value", "better", "status", "words"), [
    (80.0, "higher", Status.FAIL, "below the lower bound 90"),
    (120.0, "higher", Status.WARN, "above the upper bound 110 (operator reference 100 ms: f.yaml: site runs);"
                                   " better than expected"),
    (80.0, "lower", Status.WARN, "below the lower bound 90"),
    (120.0, "lower", Status.FAIL, "above the upper bound 110"),
    (100.0, "higher", Status.PASS, ""),
])
def test_bounds_fail_on_the_bad_side_and_warn_on_the_good_side(value, better, status, words):
    ref = Reference(value=100, lower=90, upper=110, unit="ms", kind="operator", source="f.yaml: site runs")
    judged = judge_measurement(Measurement(metric="m", value=value, unit="ms", better=better), ref, None, POLICY)
    assert judged.status is status and words in judged.reason


def test_a_reference_in_another_unit_is_not_used_silently():
    ref = Reference(value=100, lower=90, upper=110, unit="GB/s", kind="operator", source="f")
    judged = judge_measurement(Measurement(metric="m", value=1, unit="MB/s"), ref, None, POLICY)
    assert judged.status is Status.WARN and "reference unit GB/s differs from the measured MB/s" in judged.reason


def check(name: str, status: Status) -> CheckResult:
    return CheckResult(name=name, kind="microbenchmark", status=status, sanity=status, reasons=(f"{name} said so",))


@pytest.mark.parametrize(("statuses", "verdict", "code", "strict_code"), [
    ([Status.PASS, Status.NOT_APPLICABLE], Status.PASS, EXIT_OK, EXIT_OK),
    ([Status.PASS, Status.WARN], Status.WARN, EXIT_WARN, EXIT_INVALID_RESULT),
    ([Status.WARN, Status.FAIL], Status.FAIL, EXIT_INVALID_RESULT, EXIT_INVALID_RESULT),
    ([Status.INCONCLUSIVE, Status.WARN], Status.INCONCLUSIVE, EXIT_INFRASTRUCTURE, EXIT_INFRASTRUCTURE),
    ([Status.INCONCLUSIVE, Status.FAIL], Status.FAIL, EXIT_INVALID_RESULT, EXIT_INVALID_RESULT),
    ([Status.NOT_APPLICABLE], Status.INCONCLUSIVE, EXIT_INFRASTRUCTURE, EXIT_INFRASTRUCTURE),  # nothing measured
    ([], Status.INCONCLUSIVE, EXIT_INFRASTRUCTURE, EXIT_INFRASTRUCTURE),
])
def test_node_verdicts_and_exit_codes(statuses, verdict, code, strict_code):
    checks = [check(f"c{i}", s) for i, s in enumerate(statuses)]
    got, reasons = node_verdict(checks, default_registry().passive)
    assert got is verdict
    assert exit_code(got, strict=False) == code and exit_code(got, strict=True) == strict_code
    if not set(statuses) - {Status.NOT_APPLICABLE}:
        assert reasons[0].startswith("nothing was measured: ")
    elif verdict is not Status.PASS:
        assert reasons and reasons[0].endswith("said so")
