"""A qualification whose GPU checks could not run is never a bare PASS (issue 35): WARN where no GPU
was found and nothing says the node has any; FAIL where --expect-gpus, Slurm's gres (a fleet's order)
or the node's own history says it has GPUs that NVML does not find (a driver that failed to load);
--expect-gpus 0 declares a CPU-only node, which may PASS."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from orchestrator.results.qualification import NodeOrder, Status
from tests.qualify.nodes import FakeNvml, gpu_trace, run_node

NONE_FOUND = "GPUs not qualified: none found (NVIDIA driver not loaded (libnvidia-ml.so not found))"


def qualify(cli, tmp_path: Path, *extra: str):
    out = tmp_path / "out"
    r = cli("qualify", "--suite", "throughput_only", "--results", str(tmp_path / "r"), "--node-name", "n1",
            "--json", "--junit", str(out / "q.xml"), "--prometheus", str(out / "q.prom"), *extra)
    return r, json.loads(r.out)


def test_a_node_without_gpus_that_nobody_expected_is_a_warn_never_a_bare_pass(cli, tmp_path: Path):
    """It was PASS, exit 0, JUnit [pass] and Prometheus "pass" with no GPU qualified."""
    r, record = qualify(cli, tmp_path)
    assert (r.code, record["verdict"]) == (4, "warn"), r.err
    assert record["reasons"][0].startswith(NONE_FOUND), record["reasons"]
    assert "--expect-gpus 0 qualifies a CPU-only node" in record["reasons"][0]
    families = {f.name: f.samples for f in text_string_to_metric_families((tmp_path / "out" / "q.prom").read_text())}
    assert {s.labels["verdict"]: s.value for s in families["mltrain_qualify_verdict"]}["warn"] == 1.0
    assert ET.parse(tmp_path / "out" / "q.xml").getroot() is not None


def test_a_cpu_only_node_declared_so_may_pass(cli, tmp_path: Path):
    r, record = qualify(cli, tmp_path, "--expect-gpus", "0")
    assert (r.code, record["verdict"], record["reasons"]) == (0, "pass", []), r.err


def test_gpus_expected_but_not_found_fail_the_node(cli, tmp_path: Path):
    r, record = qualify(cli, tmp_path, "--expect-gpus", "2")
    assert (r.code, record["verdict"]) == (1, "fail"), r.err
    assert record["reasons"][0] == (
        "GPUs not qualified: NVML finds 0 GPU(s) (NVIDIA driver not loaded (libnvidia-ml.so not found)), but this"
        " node is expected to have 2 (--expect-gpus 2): a driver that failed to load or a GPU that fell off the bus")
    assert record["remediation"] == [{"action": "drain_reboot", "check": "gpu_health", "gpu": None, "node": None}]


def test_a_node_whose_history_had_gpus_fails_when_none_are_found(mltrain_env, tmp_path: Path):
    """The driver did not load tonight: last night's qualification found two GPUs."""
    first = run_node(tmp_path / "r", nvml=FakeNvml(gpu_trace()), suite="throughput_only")
    assert first.hardware.gpu_count == 2
    record = run_node(tmp_path / "r", nvml=FakeNvml(missing_library=True), suite="throughput_only")
    assert record.verdict is Status.FAIL and record.exit_code == 1, record.reasons
    assert (f"but this node is expected to have 2 (its history: qualification {first.qualification_id} found 2;"
            " --expect-gpus N says what it has now)" in record.reasons[0]), record.reasons
    declared = run_node(tmp_path / "r", nvml=FakeNvml(missing_library=True), suite="throughput_only", expect_gpus=0)
    assert declared.verdict is Status.PASS, declared.reasons  # its GPUs taken out: said so, it may PASS


def test_a_fleets_node_expects_the_gpus_of_its_slurm_gres(cli, tmp_path: Path):
    """A fleet's order carries the node's gres: a node job on a node whose driver failed FAILs."""
    order = tmp_path / "order.json"
    order.write_text(json.dumps(NodeOrder(
        fleet_id="fleet-x", node="n1", suite="throughput_only", results=tmp_path / "r", record=tmp_path / "rec.json",
        expect_gpus=4, expect_gpus_source="Slurm's gres for n1: 4 GPU(s)").to_json()))
    r = cli("qualify", "order", str(order))
    assert r.code == 1, r.err
    record = json.loads((tmp_path / "rec.json").read_text())
    assert "expected to have 4 (Slurm's gres for n1: 4 GPU(s))" in record["reasons"][0], record["reasons"]
