"""MLPerf Inference's compliance tests verified by the rules of MLCommons' verification scripts
(mlcommons/inference ``compliance/TEST01/verify_accuracy.py``, ``verify_performance.py``,
``compliance/TEST04/verify_performance.py``), on the run's own logs, each writing the report file the
submission checker reads (``verify_accuracy.txt``, ``verify_performance.txt``: a ``TEST PASS`` line
when it passes).

- TEST01, accuracy: every response the compliance test logged for a sample the accuracy run also
  answered must agree with it in its first value (read as the model's response type); at least one
  sample must be compared.
- TEST01, performance: both tests VALID for LoadGen, the same scenario (and Server latency bound), the
  compliance score within 10% of the submission's (20% for SingleStream at or below 200 us and
  MultiStream at or below 1.6 ms): samples/s, or the early-stopping latency estimate.
- TEST04, performance: both summaries VALID, the same scenario, the test (the same sample over and
  over) not more than 10% (20%, as above) faster than the submission: no cached results.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from orchestrator.config.files import one_line
from orchestrator.config.reading import ACCURACY_ENTRY_BYTES, ACCURACY_LOG_BYTES, iter_json_array
from orchestrator.errors import LogError
from orchestrator.inference.logs import detail_values

RESULT_FIELD = {"Offline": "result_samples_per_second", "SingleStream": "early_stopping_latency_ss",
                "MultiStream": "early_stopping_latency_ms", "Server": "result_completed_samples_per_sec"}
"""The score TEST01's performance check compares, per scenario (its RESULT_FIELD)."""
RESPONSE_TYPES = {"byte": np.byte, "float32": np.float32, "int32": np.int32, "int64": np.int64}
PASS, FAIL = "TEST PASS", "TEST FAIL"


@dataclass(frozen=True, kw_only=True)
class Verdict:
    passed: bool
    report: str
    """The report file's text (ends with the TEST PASS / TEST FAIL line)."""


def _threshold(scenario: str, reference_score: float) -> float:
    """10%, or 20% where a latency is too short for run-to-run noise to stay below 10%."""
    short = (scenario == "SingleStream" and reference_score <= 200000) or (
        scenario == "MultiStream" and reference_score <= 1600000)
    return 0.20 if short else 0.10


@dataclass(frozen=True)
class _Response:
    """What TEST01's accuracy check keeps of one logged response: its first value (None when it has
    none) and a digest of its bytes (duplicates are compared whole, as the reference compares their
    hex, but for the case of its letters), never the response itself: a 3D-UNet log holds whole
    segmentations, so only one response is in memory at a time. A response that is not hex of the
    response type is refused wherever it lies (the reference fails on it only where it compares it)."""

    first: Any
    digest: bytes


def _responses(path: Path, dtype: type[np.generic]) -> Iterator[tuple[int, _Response]]:
    """Each logged response of a LoadGen accuracy log, read one at a time (`iter_json_array`)."""
    try:
        for entry in iter_json_array(path, max_bytes=ACCURACY_LOG_BYTES, max_item_bytes=ACCURACY_ENTRY_BYTES):
            if not isinstance(entry, dict) or "qsl_idx" not in entry or "data" not in entry:
                raise LogError(f"{path}: not a LoadGen accuracy log (a list of responses with qsl_idx and data)")
            try:
                index, data = int(entry["qsl_idx"]), str(entry["data"])
                raw = bytes.fromhex(data)
                del data
                values = np.frombuffer(raw, dtype)
            except (TypeError, ValueError) as exc:
                raise LogError(f"{path}: response {str(entry['qsl_idx'])[:20]}: {one_line(str(exc))[:80]}") from None
            yield index, _Response(first=values[0] if values.size else None,
                                   digest=hashlib.sha256(raw).digest())
    except (OSError, ValueError) as exc:
        raise LogError(f"{path}: unreadable LoadGen accuracy log ({exc})") from None


def check_test01_accuracy(accuracy_log: Path, test_log: Path, response: str) -> Verdict:
    """TEST01's accuracy check: the compliance test's logged responses against the accuracy run's."""
    dtype = RESPONSE_TYPES[response]
    reference: dict[int, _Response] = {}
    accuracy_entries = duplicates = reference_mismatches = 0
    for index, logged in _responses(accuracy_log, dtype):
        accuracy_entries += 1
        if index in reference:
            duplicates += 1
            reference_mismatches += reference[index].digest != logged.digest
        else:
            reference[index] = logged
    test_entries = matched = mismatched = missing = 0
    for index, ours in _responses(test_log, dtype):
        test_entries += 1
        theirs = reference.get(index)
        if theirs is None:
            missing += 1
            continue
        matched += 1
        if ours.first is None or theirs.first is None:
            mismatched += (ours.first is None) != (theirs.first is None)
        elif ours.first != theirs.first:
            mismatched += 1
    passed = mismatched == 0 and matched > 0
    lines = [f"num_acc_log_entries = {accuracy_entries}", f"num_acc_log_duplicate_keys = {duplicates}",
             f"num_acc_log_data_mismatch = {reference_mismatches}", f"num_perf_log_entries = {test_entries}",
             f"num_perf_log_qsl_idx_match = {matched}", f"num_perf_log_data_mismatch = {mismatched}",
             f"num_missing_qsl_idxs = {missing}", PASS if passed else FAIL]
    return Verdict(passed=passed, report="\n".join(lines) + "\n")


def _detail(path: Path) -> dict:
    try:
        return detail_values(path)
    except OSError as exc:
        raise LogError(f"{path}: {exc.strerror or exc}") from None


def check_test01_performance(reference_detail: Path, test_detail: Path) -> Verdict:
    """TEST01's performance check on the two tests' detail logs."""
    logs = {"reference": _detail(reference_detail), "test": _detail(test_detail)}
    for name, path in (("reference", reference_detail), ("test", test_detail)):
        if logs[name].get("result_validity") != "VALID":
            return Verdict(passed=False, report=f"{FAIL}: Invalid results in {path}\n")
    scenario = str(logs["reference"].get("effective_scenario"))
    if str(logs["test"].get("effective_scenario")) != scenario:
        return Verdict(passed=False, report=f"{FAIL}: Test and reference scenarios do not match!\n")
    if scenario == "Server" and logs["test"].get("effective_target_latency_ns") != logs["reference"].get(
            "effective_target_latency_ns"):
        return Verdict(passed=False, report=f"{FAIL}: Server target latency mismatch\n")
    reference, test = (float(logs[name][RESULT_FIELD[scenario]]) for name in ("reference", "test"))
    threshold = _threshold(scenario, reference)
    passed = reference * (1 - threshold) <= test <= reference * (1 + threshold)
    return Verdict(passed=passed, report=f"Reference score = {reference}\nTest score = {test}\n"
                                         f"{PASS if passed else FAIL + ': Test score invalid'}\n")


def _summary(path: Path) -> tuple[str, float | None, bool]:
    """(scenario, score, valid) of a summary, scored as TEST04's script scores it."""
    patterns = {"SingleStream": r".*Early stopping (90th|90.0th|99.9th) percentile estimate",
                "MultiStream": r".*Early stopping (99th|99.0th) percentile estimate",
                "Server": r"Completed samples per second", "Offline": r"Samples per second"}
    scenario, score, valid = "", None, True
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError as exc:
        raise LogError(f"{path}: {exc.strerror or exc}") from None
    for line in lines:
        if re.match("Scenario", line):
            scenario = line.split(": ", 1)[1].strip()
        elif scenario in patterns and re.match(patterns[scenario], line):
            value = float(line.split(": ", 1)[1].strip())
            score = 1e9 / value if scenario in ("SingleStream", "MultiStream") else value
        elif re.match("Result is", line):
            valid = line.split(": ", 1)[1].strip() != "INVALID"
    return scenario, score, valid


def check_test04_performance(reference_summary: Path, test_summary: Path) -> Verdict:
    """TEST04's check on the two tests' summaries: the same sample issued over and over is not faster."""
    ref_scenario, reference, ref_valid = _summary(reference_summary)
    test_scenario, test, test_valid = _summary(test_summary)
    if not ref_valid:
        return Verdict(passed=False, report=f"{FAIL}: Reference results are invalid\n")
    if not test_valid:
        return Verdict(passed=False, report=f"{FAIL}: Test results are invalid\n")
    if ref_scenario != test_scenario or reference is None or test is None:
        return Verdict(passed=False, report="Test and reference scenarios do not match!\n")
    passed = test < reference * (1 + _threshold(ref_scenario, reference))
    return Verdict(passed=passed, report=f"reference score = {reference}\ntest score = {test}\n"
                                         f"{PASS if passed else FAIL + ': Test score invalid'}\n")
