"""Silent data corruption: a fixed GEMM and a training step, each run twice on every GPU (the CPU here)
and compared bit for bit, across runs and across GPUs of one model. A fault injector at the kernels'
boundary (tests/qualify/flip_bit.py) flips one bit: in one run, the check FAILs naming the run; in every
run of one GPU of three, the runs agree but the GPU does not with its peers, and it is named. A whole
node whose probe flips one bit FAILs, asking for the part to be replaced."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from orchestrator.results.qualification import Remedy, Status
from tests.conftest import PROJECT
from tests.qualify.fake_cuda import FakeGpus
from tests.qualify.flip_bit import FlipBit
from tests.qualify.nodes import FakeNvml, run_node
from workloads.common.probe import harness, protocol, registry, sdc
from workloads.common.probe.device import Device

SPEC = {"size": 64, "width": 16, "repeats": 2}


def run_cases(capsys, device: Device, calls: set[int] = frozenset()) -> dict[str, dict]:  # type: ignore[assignment]
    context = harness.Context(device=device, seconds=0.01)
    with FlipBit(set(calls)):
        for case in harness.plan(sdc, registry.with_defaults(sdc.DECLARATION, SPEC), context):
            harness.run_case(case, device)
    lines = [json.loads(line.removeprefix(protocol.PREFIX)) for line in capsys.readouterr().out.splitlines()]
    assert not [line for line in lines if line["kind"] == "error"], lines
    return {line["metric"]: line for line in lines if line["kind"] == "result"}


def test_on_the_cpu_the_same_inputs_give_the_same_bits(capsys):
    results = run_cases(capsys, Device(kind="cpu"))
    assert set(results) == {"sdc_gemm_ms", "sdc_step_ms"}
    for line in results.values():
        assert line["sanity"]["passed"] is True and "2 runs of the" in line["sanity"]["detail"], line
        assert line["performance"]["unit"] == "ms" and line["performance"]["better"] == "lower"


def test_one_run_whose_bits_differ_fails(capsys):
    results = run_cases(capsys, Device(kind="cpu"), calls={2})  # the GEMM's second run
    gemm = results["sdc_gemm_ms"]["sanity"]
    assert gemm["passed"] is False
    assert gemm["detail"] == "the GEMM gave other bits from the same inputs: run 2 in 1 of 4096 values"
    assert results["sdc_step_ms"]["sanity"]["passed"] is True


def test_a_gpu_wrong_the_same_way_every_run_differs_from_its_peers_and_is_named(capsys):
    results = run_cases(capsys, FakeGpus(gpu_count=3), calls={5, 6})  # both GEMM runs of GPU 2
    assert results["sdc_gemm_ms_gpu2"]["sanity"]["passed"] is True  # its runs agree with each other
    assert [results[f"sdc_agree_gpu{i}"]["sanity"]["passed"] for i in range(3)] == [True, True, False]
    assert results["sdc_agree_gpu2"]["sanity"]["detail"] == "its gemm gave other bits than 2 of the 3 Stand-in GPU"
    assert results["sdc_agree_gpu0"]["performance"]["value"] == 2  # GPU 0 and 1 share their bits


def test_of_two_gpus_that_differ_neither_can_be_told_right(capsys):
    results = run_cases(capsys, FakeGpus(gpu_count=2), calls={3, 4})
    assert [results[f"sdc_agree_gpu{i}"]["sanity"]["passed"] for i in range(2)] == [False, False]
    assert "no majority: which is wrong cannot be told" in results["sdc_agree_gpu0"]["sanity"]["detail"]


def test_a_node_whose_probe_flips_one_bit_fails_the_sdc_check_and_asks_to_replace(mltrain_env, tmp_path: Path,
                                                                                 monkeypatch):
    monkeypatch.setenv("FLIP_CALLS", "2")  # the real probe, its GEMM's second run one bit off
    config = tmp_path / "sdc.yaml"
    config.write_text(f"workload: fakebench\nprobe: {{command: [{sys.executable}, "
                      f"{PROJECT / 'tests' / 'qualify' / 'flip_bit.py'}]}}\n"
                      "suites:\n  sdc: {cpu: {sdc: {size: 64, width: 16}}}\n")
    record = run_node(tmp_path / "r", nvml=FakeNvml(missing_library=True), config=config, suite="sdc")
    check = record.check("sdc")
    assert check.kind == "integrity" and check.status is Status.FAIL and check.sanity is Status.FAIL
    assert check.reasons == ("sdc_gemm_ms: wrong result (the GEMM gave other bits from the same inputs: run 2 in 1"
                             " of 4096 values)",)
    assert record.verdict is Status.FAIL and [r.action for r in record.remediation] == [Remedy.REPLACE]
