"""The recipe for a new check (docs/architecture.md), followed by a toy: its one file
(tests/qualify/toy_check.py) and one registration line, nothing else edited. In a copy of the tree,
`mltrain qualify` runs it end to end and judges it by its own declared floor; in place, it runs in the
real probe, is judged against a reference in its declared unit, repeated by the quorum and reported in
JSON, JUnit and Prometheus. And every check's timeout holds: one that hangs is INCONCLUSIVE, named
with its timeout, while the rest of the suite runs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from orchestrator.errors import EXIT_INFRASTRUCTURE
from orchestrator.qualify.catalog import default_registry, with_probe_module
from orchestrator.qualify.checks.base import result
from orchestrator.qualify.checks.declaration import Declaration
from orchestrator.render.junit import junit_xml
from orchestrator.render.prometheus import textfile
from orchestrator.results.qualification import CheckResult, Status
from tests.conftest import copy_of_the_tree
from tests.qualify import toy_check
from tests.qualify.nodes import FakeNvml, run_node

TOY = "tests.qualify.toy_check"


def cpu_node() -> FakeNvml:
    """NVML as a host without GPUs answers it (its library absent)."""
    return FakeNvml(missing_library=True)


def suites(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "qualify.yaml"
    path.write_text(f"workload: fakebench\nquorum: {{repeats: 2, rule: majority}}\nsuites:\n{body}")
    return path


def references(tmp_path: Path) -> Path:
    path = tmp_path / "refs.yaml"
    path.write_text("systems:\n  - model: '*'\n    source: the toy's acceptance runs\n    references:\n"
                    "      toy_rate: [100.0, -0.1, null, ops/s]\n")
    return path


def tree_with_the_toy(tmp_path: Path) -> Path:
    """A copy of the tree with the toy added as the recipe says: its file in the probe's package, its
    name in the probe's ``registry.CHECKS``."""
    tree = copy_of_the_tree(tmp_path / "tree")
    probe = tree / "workloads" / "common" / "probe"
    shutil.copy2(Path(toy_check.__file__), probe / "toy.py")  # its file
    registration = probe / "registry.py"
    before = registration.read_text()
    after = before.replace('    "sdc",\n', '    "sdc",\n    "toy",\n', 1)  # its one line
    assert after != before, "the probe's registry.CHECKS no longer lists sdc on a line of its own"
    registration.write_text(after)
    return tree


@pytest.mark.timeout(600)
def test_a_toy_check_added_to_a_copy_of_the_tree_qualifies_a_node_end_to_end(mltrain_env, tmp_path: Path):
    tree = tree_with_the_toy(tmp_path)
    suites = tmp_path / "qualify.yaml"
    suites.write_text("workload: fakebench\nsuites:\n  toy:\n    probe_seconds_per_case: 0.05\n"
                      "    cpu: {toy: {rate: 100.0}}\n")
    env = {**os.environ, **mltrain_env, "PYTHONPATH": str(tree), "MLTRAIN_QUALIFY_FILE": str(suites),
           "TOY_COUNTER": str(tmp_path / "runs")}
    done = subprocess.run([sys.executable, "-m", "orchestrator.cli", "qualify", "--suite", "toy", "--results",
                           str(tmp_path / "r"), "--node-name", "n1", "--expect-gpus", "0", "--json"],
                          cwd=tree, env=env, capture_output=True, text=True, timeout=540)
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout)
    assert [c["name"] for c in record["checks"]] == ["gpu_health", "dcgm_diag", "toy"]
    toy = next(c for c in record["checks"] if c["name"] == "toy")
    assert toy["kind"] == "microbenchmark" and toy["status"] == "pass" and toy["sanity"] == "pass"
    (rate,) = toy["measurements"]
    assert rate["metric"] == "toy_rate" and rate["value"] == 100.0 and rate["status"] == "pass"
    reference = rate["reference"]  # no --references, no history: its own declared floor judges it
    assert reference["kind"] == "floor" and reference["lower"] == 10.0 and "toy's own" in reference["source"]
    assert record["verdict"] == "pass" and (tmp_path / "runs").read_text() == "1"


def test_a_toy_check_added_by_the_recipe_runs_is_judged_repeated_and_reported(mltrain_env, tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("TOY_COUNTER", str(tmp_path / "runs"))
    checks = with_probe_module(default_registry(), TOY)  # the one registration line
    config = suites(tmp_path, "  toy:\n    cpu: {toy: {rate: 100.0, slow_runs: 1}}\n")
    record = run_node(tmp_path / "r", nvml=cpu_node(), config=config, suite="toy", checks=checks,
                      references=references(tmp_path), expect_gpus=0)  # a CPU node, declared so: it may PASS
    toy = record.check("toy")
    assert toy is not None and toy.kind == "microbenchmark" and toy.sanity is Status.PASS
    (rate,) = toy.measurements
    assert rate.quorum is not None and (rate.quorum.first, rate.quorum.repeats) == (50.0, (100.0,))
    assert rate.status is Status.PASS and rate.value == 100.0 and rate.reference.kind == "operator"
    assert record.verdict is Status.PASS and (tmp_path / "runs").read_text() == "2", record.reasons  # 1 run, 1 repeat
    assert [c.name for c in record.checks] == ["gpu_health", "dcgm_diag", "toy"]

    as_json = json.loads(json.dumps(record.to_json()))
    assert next(c for c in as_json["checks"] if c["name"] == "toy")["measurements"][0]["quorum"]["outcome"] \
        == "overturned"
    case = next(c for c in ET.fromstring(junit_xml([record])).iter("testcase") if c.get("name") == "toy")
    assert case.get("classname").endswith(".microbenchmark") and "toy_rate = 100 ops/s [pass]" in case.findtext(
        "system-out")
    samples = {(s.labels.get("check"), s.labels.get("metric")): s.value
               for f in text_string_to_metric_families(textfile([record]).decode()) for s in f.samples
               if f.name == "mltrain_qualify_metric"}
    assert samples[("toy", "toy_rate")] == 100.0


def test_a_toy_check_slow_every_time_fails_on_its_declared_reference(mltrain_env, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("TOY_COUNTER", str(tmp_path / "runs"))
    checks = with_probe_module(default_registry(), TOY)
    config = suites(tmp_path, "  toy:\n    cpu: {toy: {rate: 100.0, slow_runs: 9}}\n")
    record = run_node(tmp_path / "r", nvml=cpu_node(), config=config, suite="toy", checks=checks,
                      references=references(tmp_path))
    toy = record.check("toy")
    assert toy.status is Status.FAIL and toy.sanity is Status.PASS and record.verdict is Status.FAIL
    assert toy.measurements[0].quorum.outcome == "confirmed" and (tmp_path / "runs").read_text() == "3"
    assert [r.key for r in record.remediation] == ["investigate"]  # its declared remedy for a slow number


@pytest.mark.timeout(120)
def test_a_probe_check_that_hangs_is_inconclusive_and_the_suite_runs_on(mltrain_env, tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch):
    """The toy sleeps an hour: the probe is stopped at its 9 s timeout and started again for gemm, which
    comes after it; the workload's throughput still runs; the node is INCONCLUSIVE, naming the toy. (The
    probe's start counts against its first check's timeout: 9 s leaves a loaded host time to import torch.)"""
    monkeypatch.setenv("TOY_COUNTER", str(tmp_path / "runs"))
    checks = with_probe_module(default_registry(), TOY, after="dcgm_diag")  # before gemm in the probe's order
    config = suites(tmp_path, "  hang:\n    cpu:\n      toy: {hang_s: 3600, timeout_minutes: 0.15}\n"
                              "      gemm: {dense: [[64, 64, 64]]}\n      throughput: {steps: 3, warmup_steps: 1}\n")
    record = run_node(tmp_path / "r", nvml=cpu_node(), config=config, suite="hang", checks=checks)
    statuses = {c.name: c.status for c in record.checks}
    assert statuses == {"gpu_health": Status.NOT_APPLICABLE, "dcgm_diag": Status.NOT_APPLICABLE,
                        "toy": Status.INCONCLUSIVE, "gemm": Status.PASS, "throughput": Status.PASS}
    assert record.check("toy").reasons == ("toy did not finish within its 9 s timeout: stopped, the other checks"
                                           " ran on",)
    assert record.verdict is Status.INCONCLUSIVE and record.exit_code == EXIT_INFRASTRUCTURE
    assert record.reasons[0].startswith("toy: toy did not finish within its 9 s timeout")
    folder = tmp_path / "r" / "qualify" / "nodes" / "testnode" / record.qualification_id
    assert (folder / "probe-2" / "output.log").is_file()  # the probe started again for gemm


@pytest.mark.timeout(60)
def test_a_check_of_mltrains_own_that_hangs_is_inconclusive_and_the_suite_runs_on(mltrain_env, tmp_path: Path):
    """A check run in mltrain's process (as NVML reads are) that never returns: given up at its timeout."""
    release = threading.Event()

    class StuckDriver:
        declaration = Declaration(name="stuck_driver", kind="health", runs="node", phase="after",
                                  settings_at="none", sanity="the driver answers", timeout_s=1.0)

        def run(self, ctx: object) -> CheckResult:
            release.wait(600)
            return result(self.declaration, Status.PASS, [])

    checks = default_registry().with_check(StuckDriver())
    config = suites(tmp_path, "  gemm:\n    cpu: {gemm: {dense: [[64, 64, 64]]}}\n")
    try:
        record = run_node(tmp_path / "r", nvml=cpu_node(), config=config, suite="gemm", checks=checks)
    finally:
        release.set()
    stuck = record.check("stuck_driver")
    assert stuck.status is Status.INCONCLUSIVE
    assert stuck.reason == "stuck_driver did not finish within its 1 s timeout: stopped, the other checks ran on"
    assert record.check("gemm").status is Status.PASS and record.verdict is Status.INCONCLUSIVE
