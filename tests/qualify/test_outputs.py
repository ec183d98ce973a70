"""JUnit and Prometheus renderings of hand-made records (every status), and the records' validation."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
from prometheus_client.parser import text_string_to_metric_families
from pydantic import ValidationError

from orchestrator.render.junit import junit_xml
from orchestrator.render.prometheus import textfile
from orchestrator.results.qualification import (
    CheckResult,
    Hardware,
    Measurement,
    QualificationRecord,
    Reference,
    Status,
)

_COUNTER = iter(range(10**6))


def make_record(throughput: float = 100.0, *, checks: tuple[CheckResult, ...] | None = None,
                verdict: Status = Status.PASS, node: str = "n1") -> QualificationRecord:
    n = next(_COUNTER)
    if checks is None:
        checks = (CheckResult(name="throughput", kind="workload", status=Status.PASS, sanity=Status.PASS,
                              measurements=(Measurement(metric="throughput_samples_per_s", value=throughput,
                                                        unit="samples/s"),)),)
    return QualificationRecord(
        qualification_id=f"{node}-quick-{n:06d}", node=node, suite="quick", runner="local",
        started_at=f"2026-01-01T00:{n // 60 % 60:02d}:{n % 60:02d}+00:00", ended_at="2026-01-01T01:00:00+00:00",
        duration_s=12.5, verdict=verdict, exit_code=0, hardware=Hardware(cpu_model="Test CPU", cpus=2),
        software={"torch": "2.13"}, checks=checks)


def every_status() -> QualificationRecord:
    ref = Reference(value=300, lower=270, upper=None, unit="TFLOP/s", kind="operator", source="refs.yaml: acceptance")
    checks = (
        CheckResult(name="gpu_health", kind="health", status=Status.FAIL, sanity=Status.FAIL,
                    reasons=("GPU0: PCIe link x8 of x16 under load",)),
        CheckResult(name="dcgm_diag", kind="health", status=Status.NOT_APPLICABLE, sanity=Status.NOT_APPLICABLE,
                    reasons=("skipped: DCGM is not installed (dcgmi not found)",)),
        CheckResult(name="gemm", kind="microbenchmark", status=Status.WARN, sanity=Status.PASS,
                    reasons=("gemm_bf16: 4% worse than its rolling median",),
                    measurements=(Measurement(metric="gemm_bf16", value=290, unit="TFLOP/s", reference=ref,
                                              status=Status.WARN, reason="..."),)),
        CheckResult(name="throughput", kind="workload", status=Status.INCONCLUSIVE, sanity=Status.INCONCLUSIVE,
                    reasons=("could not run: the engine is down",)),
        CheckResult(name="memory", kind="microbenchmark", status=Status.PASS, sanity=Status.PASS),
    )
    return make_record(checks=checks, verdict=Status.FAIL)


def test_junit_has_one_testcase_per_check_with_failure_error_and_skipped():
    root = ET.fromstring(junit_xml([every_status()]).encode())
    suite = root.find("testsuite")
    assert (root.get("tests"), root.get("failures"), root.get("errors"), root.get("skipped")) == ("5", "1", "1", "1")
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert cases["gpu_health"].find("failure").get("message") == "GPU0: PCIe link x8 of x16 under load"
    assert cases["throughput"].find("error").get("type") == "inconclusive"
    assert cases["dcgm_diag"].find("skipped").get("message").startswith("not applicable: skipped: DCGM")
    assert cases["gemm"].find("properties/property").get("name") == "warn"
    assert "bounds [270, -] (operator: refs.yaml: acceptance)" in cases["gemm"].findtext("system-out")
    assert cases["memory"].find("failure") is None and cases["memory"].find("skipped") is None


def test_prometheus_textfile_parses_and_carries_bounds():
    families = {f.name: f.samples for f in text_string_to_metric_families(textfile([every_status()]).decode())}
    status = {(s.labels["check"], s.labels["status"]): s.value for s in families["mltrain_qualify_check_status"]}
    assert status["gpu_health", "fail"] == 1 and status["dcgm_diag", "not_applicable"] == 1
    assert status["throughput", "inconclusive"] == 1 and status["gemm", "pass"] == 0
    lower = {s.labels["metric"]: s.value for s in families["mltrain_qualify_metric_lower_bound"]}
    assert lower == {"gemm_bf16": 270.0} and "mltrain_qualify_metric_upper_bound" not in families or \
        not families["mltrain_qualify_metric_upper_bound"]
    assert families["mltrain_qualify_last_run_timestamp_seconds"][0].value > 1.7e9


def test_records_refuse_what_they_cannot_hold():
    with pytest.raises(ValidationError, match="finite"):
        Measurement(metric="m", value=float("nan"), unit="s")
    with pytest.raises(ValidationError, match="a node.s verdict is pass, warn, fail, inconclusive"):
        make_record(verdict=Status.NOT_APPLICABLE)
    record = make_record()
    assert QualificationRecord.model_validate(record.to_json()) == record
