"""Each FAIL carries what it asks for as a field (an action and the GPU it is for), in the record's
JSON, JUnit's properties and the Prometheus textfile, so that a fleet tool acts without reading the
reasons; records written before the field existed still load."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from orchestrator.qualify import remedies
from orchestrator.qualify.catalog import default_registry
from orchestrator.render.junit import junit_xml
from orchestrator.render.prometheus import textfile
from orchestrator.render.qualification import verdict_lines
from orchestrator.results.qualification import (
    CheckResult,
    Measurement,
    QualificationRecord,
    Remediation,
    Remedy,
    Status,
)
from tests.qualify.nodes import FakeNvml, gpu_trace, probe_source, run_node, suite_of


def two_faults() -> dict:
    """GPU1's row remap pending (reset it), GPU0's link at x8 of x16 under load (reseat it)."""
    trace = gpu_trace(device={"remapped_rows": [0, 0, 1, 0]}, gpu=1)
    trace["samples"][0][0]["pcie_current_width"] = 8
    return trace


def test_health_faults_carry_their_remedy_per_gpu_in_json_junit_and_prometheus(mltrain_env, tmp_path: Path):
    record = run_node(tmp_path / "r", nvml=FakeNvml(two_faults()), probe=probe_source({"gemm_fp32_64x64x64": 1.0}))
    health = record.check("gpu_health")
    assert health.status is Status.FAIL and record.verdict is Status.FAIL
    expected = [{"action": "reseat", "check": "gpu_health", "gpu": 0, "node": None},
                {"action": "reset_gpu", "check": "gpu_health", "gpu": 1, "node": None}]
    stored = json.loads(json.dumps(record.to_json()))
    assert stored["remediation"] == expected  # the node's: what a fleet tool reads first
    assert next(c for c in stored["checks"] if c["name"] == "gpu_health")["remediation"] == expected
    assert all(not c["remediation"] for c in stored["checks"] if c["status"] != "fail")

    root = ET.fromstring(junit_xml([record]))
    suite_props = [p.get("value") for p in root.find("testsuite/properties") if p.get("name") == "remediation"]
    assert suite_props == ["reseat:gpu0", "reset_gpu:gpu1"]
    case = next(c for c in root.iter("testcase") if c.get("name") == "gpu_health")
    assert [p.get("value") for p in case.iter("property") if p.get("name") == "remediation"] == ["reseat:gpu0",
                                                                                                "reset_gpu:gpu1"]

    families = {f.name: f.samples for f in text_string_to_metric_families(textfile([record]).decode())}
    asked = {(s.labels["check"], s.labels["action"], s.labels["gpu"]) for s in families["mltrain_qualify_remediation"]
             if s.value == 1}
    assert asked == {("gpu_health", "reseat", "0"), ("gpu_health", "reset_gpu", "1")}
    assert "remediation: reseat (GPU0, gpu_health), reset_gpu (GPU1, gpu_health)" in verdict_lines(record)


def test_a_number_below_its_reference_asks_for_its_checks_remedy_on_its_gpu():
    gemm = default_registry().declaration("gemm")
    slow = CheckResult(name="gemm", kind="microbenchmark", status=Status.FAIL, sanity=Status.PASS, measurements=(
        Measurement(metric="gemm_bf16_8192x8192x8192_gpu3", value=100.0, unit="TFLOP/s", status=Status.FAIL),
        Measurement(metric="gemm_bf16_8192x8192x8192_gpu2", value=700.0, unit="TFLOP/s", status=Status.PASS)))
    assert remedies.remediate(slow, gemm).remediation == (
        Remediation(action=gemm.remedies.slow, check="gemm", gpu=3),)
    passed = slow.model_copy(update={"status": Status.WARN, "remediation": slow.remediation})
    assert remedies.remediate(passed, gemm).remediation == ()  # nothing is asked of what did not fail


def test_a_job_that_ran_out_of_disk_asks_to_free_it():
    full = CheckResult(name="throughput", kind="workload", status=Status.FAIL, sanity=Status.FAIL,
                       sanity_reasons=("fakebench throughput: disk full: OSError: [Errno 28] No space left on"
                                       " device",))
    assert [r.action for r in remedies.remediate(full, default_registry().declaration("throughput")).remediation] \
        == [Remedy.FREE_DISK]


def test_a_wrong_result_on_one_gpu_asks_to_replace_that_gpu(tmp_path: Path):
    from orchestrator.qualify import micro
    from orchestrator.qualify.devices import Gpu
    from orchestrator.qualify.probe_lines import ProbeRun
    from orchestrator.results.records import Exit
    from orchestrator.runners.outcome import JobOutcome
    from workloads.common.probe import protocol

    run = ProbeRun(outcome=JobOutcome(job_id="pid:1", exit=Exit(code=0), log=tmp_path / "out", timed_out=False,
                                      lost="", seconds=1.0))
    for line in (protocol.line("device", protocol=protocol.PROTOCOL, device="cuda", gpu_count=2),
                 protocol.line("result", check="gemm", metric="gemm_bf16_64x64x64_gpu1", gpu=1,
                               sanity={"passed": False, "detail": "max relative error 0.4"},
                               performance={"value": 1.0, "unit": "TFLOP/s", "better": "higher", "detail": ""}),
                 protocol.line("error", check="gemm", metric="gemm_fp32_64x64x64_gpu0", gpu=0,
                               error="RuntimeError: CUDA error: an illegal memory access was encountered"),
                 protocol.line("timing", check="gemm", seconds=1.0)):
        run.observe(line)
    gpus = {0: Gpu(index=4, pci_bus_id="00000000:3B:00.0"), 1: Gpu(index=5, pci_bus_id="00000000:5E:00.0")}
    suite = suite_of(cuda={"gemm": {"dtypes": ["bf16"], "dense": [[64, 64, 64]]}})
    (gemm,) = micro.probe_checks(run, suite, default_registry(), gpus)
    assert gemm.status is Status.FAIL
    assert [(r.action, r.gpu) for r in gemm.remediation] == [(Remedy.REPLACE, 5), (Remedy.RESET_GPU, 4)]


def test_a_record_written_before_remediation_was_kept_still_loads(mltrain_env, tmp_path: Path):
    record = run_node(tmp_path / "r", nvml=FakeNvml(two_faults()), probe=probe_source({"gemm_fp32_64x64x64": 1.0}))
    old = record.to_json()
    del old["remediation"]
    for check in old["checks"]:
        del check["remediation"]
    loaded = QualificationRecord.from_json(old)
    assert loaded.remediation == () and loaded.verdict is Status.FAIL
    assert "remediation" not in " ".join(verdict_lines(loaded)) and junit_xml([loaded])
