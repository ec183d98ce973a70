"""MLPerf's compliance verification and accuracy-log truncation, by the rules of MLCommons' scripts
(compliance/TEST01/verify_accuracy.py and verify_performance.py, compliance/TEST04/verify_performance.py,
tools/submission/truncate_accuracy_log.py), on made-up logs whose verdicts are known."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from orchestrator.inference.compliance import check_test01_accuracy, check_test01_performance, check_test04_performance
from orchestrator.inference.export import truncate_accuracy_log


def log(path: Path, entries: list[tuple[int, np.ndarray]]) -> Path:
    path.write_text(json.dumps([{"seq_id": n, "qsl_idx": i, "data": a.tobytes().hex().upper()}
                                for n, (i, a) in enumerate(entries)]))
    return path


def test_test01_accuracy_compares_the_first_value_of_each_sample_both_logs_hold(tmp_path: Path):
    accuracy = log(tmp_path / "acc.json", [(i, np.array([i, 0.5], np.float32)) for i in range(8)])
    same = log(tmp_path / "same.json", [(3, np.array([3, 9.0], np.float32)), (5, np.array([5, 0.5], np.float32))])
    verdict = check_test01_accuracy(accuracy, same, "float32")  # only the first value counts, as in the reference
    assert verdict.passed and "num_perf_log_qsl_idx_match = 2" in verdict.report
    assert verdict.report.endswith("TEST PASS\n")
    differ = log(tmp_path / "differ.json", [(3, np.array([4, 0.5], np.float32))])
    assert check_test01_accuracy(accuracy, differ, "float32").report.splitlines()[-2:] == ["num_missing_qsl_idxs = 0",
                                                                                    "TEST FAIL"]
    unseen = log(tmp_path / "unseen.json", [(99, np.array([1], np.float32))])
    assert not check_test01_accuracy(accuracy, unseen, "float32").passed  # nothing compared is no pass


def detail(path: Path, scenario: str, valid: bool, score: float) -> Path:
    field = {"Offline": "result_samples_per_second", "SingleStream": "early_stopping_latency_ss"}[scenario]
    lines = [{"key": "effective_scenario", "value": scenario}, {"key": "result_validity",
                                                                "value": "VALID" if valid else "INVALID"},
             {"key": field, "value": score}]
    event = {"time_ms": 0, "event_type": "POINT_IN_TIME", "metadata": {}}
    path.write_text("".join(f":::MLLOG {json.dumps({**e, **event})}\n" for e in lines))
    return path


def test_test01_performance_holds_the_score_within_10_or_20_percent(tmp_path: Path):
    reference = detail(tmp_path / "ref.txt", "Offline", True, 100.0)
    assert check_test01_performance(reference, detail(tmp_path / "a.txt", "Offline", True, 109.0)).passed
    assert not check_test01_performance(reference, detail(tmp_path / "b.txt", "Offline", True, 111.0)).passed
    assert check_test01_performance(reference, detail(tmp_path / "c.txt", "Offline", False, 100.0)).report.startswith(
        "TEST FAIL: Invalid results in")
    short = detail(tmp_path / "ss.txt", "SingleStream", True, 150_000)  # 150 us: run-to-run noise, 20%
    assert check_test01_performance(short, detail(tmp_path / "d.txt", "SingleStream", True, 175_000)).passed


def summary(path: Path, scenario: str, valid: bool, score: float) -> Path:
    verdict = "VALID" if valid else "INVALID"
    path.write_text(f"Scenario : {scenario}\nSamples per second: {score}\nResult is : {verdict}\n")
    return path


def test_test04_fails_a_test_that_beats_the_submission_by_more_than_10_percent(tmp_path: Path):
    reference = summary(tmp_path / "ref.txt", "Offline", True, 100.0)
    assert check_test04_performance(reference, summary(tmp_path / "a.txt", "Offline", True, 105.0)).passed
    assert check_test04_performance(reference, summary(tmp_path / "b.txt", "Offline", True, 50.0)).passed  # slower
    failed = check_test04_performance(reference, summary(tmp_path / "c.txt", "Offline", True, 130.0))
    assert not failed.passed and failed.report.endswith("TEST FAIL: Test score invalid\n")
    assert check_test04_performance(summary(tmp_path / "d.txt", "Offline", False, 1.0), reference).report == \
        "TEST FAIL: Reference results are invalid\n"


def test_truncation_keeps_4096_characters_of_each_end_and_the_hash_of_the_whole(tmp_path: Path):
    body = "".join(f"{i:07d}," for i in range(2000))  # 16000 characters
    (tmp_path / "mlperf_log_accuracy.json").write_text(body)
    (tmp_path / "accuracy.txt").write_text("accuracy=76.456%, good=38228, total=50000\n")
    value = truncate_accuracy_log(tmp_path / "mlperf_log_accuracy.json", tmp_path / "accuracy.txt")
    assert value == hashlib.sha256(body.encode()).hexdigest()
    assert (tmp_path / "accuracy.txt").read_text().endswith(f"\n\nhash={value}\n")
    assert (tmp_path / "mlperf_log_accuracy.json").read_text() == f"{body[:4096]}\n\n...\n\n{body[-4096:]}"
    (tmp_path / "small.json").write_text("[]")
    (tmp_path / "small.txt").write_text("mAP=1.000%\n")
    truncate_accuracy_log(tmp_path / "small.json", tmp_path / "small.txt")
    assert (tmp_path / "small.json").read_text() == "[]"  # under 4096 bytes: kept whole, hashed all the same
