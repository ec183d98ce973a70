"""DCGM diagnostics: skipped with a reason where dcgmi is absent, parsed where it answers (a stand-in
dcgmi prints DCGM 3's JSON layout), never passed on a host without GPUs."""

from __future__ import annotations

import json
from pathlib import Path

from orchestrator.qualify.dcgm import dcgm_check, judge_report
from orchestrator.results.qualification import Status

REPORT = {"DCGM GPU Diagnostic": {"test_categories": [
    {"category": "Deployment", "tests": [{"name": "Denylist", "results": [{"status": "Pass"}]},
                                         {"name": "Persistence Mode", "results": [{"status": "Warn",
                                          "warnings": [{"warning": "Persistence mode for GPU 0 is disabled."}]}]}]},
    {"category": "Hardware", "tests": [{"name": "GPU Memory", "results": [
        {"gpu_id": "0", "status": "Pass"}, {"gpu_id": "1", "status": "Fail", "info": "Memory errors detected"}]}]},
]}}


def fake_dcgmi(tmp_path: Path, report: object) -> str:
    script = tmp_path / "dcgmi"
    text = report if isinstance(report, str) else json.dumps(report)
    script.write_text(f"#!/bin/sh\ncat <<'EOF'\n{text}\nEOF\n")
    script.chmod(0o755)
    return str(script)


def test_failures_and_warnings_name_the_test_and_gpu(tmp_path: Path):
    check = dcgm_check(2, gpu_count=2, which=lambda name: fake_dcgmi(tmp_path, REPORT))
    assert check.status is Status.FAIL
    assert check.reasons == ("DCGM Persistence Mode: Warn: Persistence mode for GPU 0 is disabled.",
                             "DCGM GPU Memory (GPU 1): Fail: Memory errors detected")
    assert check.facts["tests"]["Denylist"] == "Pass" and check.facts["level"] == 2


def test_absent_dcgm_and_absent_gpus_are_not_applicable_with_the_reason():
    assert dcgm_check(1, gpu_count=2, which=lambda name: None).reasons == (
        "skipped: DCGM is not installed (dcgmi not found)",)
    assert dcgm_check(1, gpu_count=0).status is Status.NOT_APPLICABLE


def test_a_report_without_tests_or_json_could_not_run(tmp_path: Path):
    assert judge_report({"version": "3.3"}, 1)[0] is Status.INCONCLUSIVE
    broken = tmp_path / "broken"
    broken.mkdir()
    check = dcgm_check(1, gpu_count=1, which=lambda name: fake_dcgmi(broken, "Error: unable to connect to host"))
    assert check.status is Status.INCONCLUSIVE and "gave no JSON" in check.reason
