"""The probe measures every visible GPU (issue 18): the largest dense GEMM of each dtype and the device
memory copy run on each GPU of a node of two or more, reported per GPU (``_gpu<i>`` and ``"gpu": i``), so
that one slow GPU of eight fails; the other cases stay on cuda:0. Without a GPU here, the checks' plans
(their cases) are read without measuring them."""

from __future__ import annotations

import functools
import json

import pytest
import torch

from workloads.common.probe import gemm, harness, memory, protocol, registry
from workloads.common.probe.device import Device

SPEC = {"gemm": {"dtypes": ["fp32", "bf16"], "dense": [[3072, 128, 1024], [5124, 9124, 2560], [2560, 64, 2560]]},
        "memory": {"host_mb": 1, "device_mb": 2, "copy_mb": 1}}


def planned(monkeypatch: pytest.MonkeyPatch, gpus: int) -> list[tuple]:
    """(check, metric, CUDA device) of every case the probe plans on a node of ``gpus`` Hopper GPUs (device
    None: a case of cuda:0 under its plain name)."""
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=0: (9, 0))
    context = harness.Context(device=Device(kind="cuda", gpu_count=gpus))
    cases = [*gemm.cases(registry.with_defaults(gemm.DECLARATION, SPEC["gemm"]), context),
             *memory.cases(registry.with_defaults(memory.DECLARATION, SPEC["memory"]), context)]
    assert all(case.measure is not None for case in cases)
    return [(case.check, case.metric, case.gpu) for case in cases]


def test_the_largest_gemm_of_each_dtype_and_the_memory_copy_run_on_every_gpu(monkeypatch):
    ran = planned(monkeypatch, gpus=8)
    for dtype in ("fp32", "bf16"):
        assert [(m, g) for c, m, g in ran if m.startswith(f"gemm_{dtype}_5124x9124x2560")] == [
            (f"gemm_{dtype}_5124x9124x2560_gpu{i}", i) for i in range(8)]
        assert ("gemm", f"gemm_{dtype}_3072x128x1024", None) in ran  # the smaller cases: cuda:0, as before
    assert [(m, g) for c, m, g in ran if m.startswith("device_copy")] == [
        (f"device_copy_GBps_gpu{i}", i) for i in range(8)]
    assert ("memory", "h2d_pinned_GBps", None) in ran


def test_one_gpu_keeps_the_plain_names(monkeypatch):
    ran = planned(monkeypatch, gpus=1)
    assert ("gemm", "gemm_bf16_5124x9124x2560", None) in ran and ("memory", "device_copy_GBps", None) in ran
    assert not [m for _, m, _ in ran if "_gpu" in m]


def test_a_per_gpu_result_line_says_which_gpu(capsys):
    cpu = Device(kind="cpu")
    context = harness.Context(device=cpu, seconds=0.01)
    case = harness.Case(check="gemm", metric="gemm_fp32_64x64x64_gpu3", gpu=3,
                        measure=functools.partial(gemm.measure_dense, context, "fp32", torch.float32, (64, 64, 64), 3))
    harness.run_case(case, cpu)
    line = json.loads(capsys.readouterr().out.removeprefix(protocol.PREFIX))
    assert line["metric"] == "gemm_fp32_64x64x64_gpu3" and line["gpu"] == 3 and line["sanity"]["passed"] is True
    assert line["performance"]["unit"] == "TFLOP/s" and line["performance"]["value"] > 0


def test_a_wrong_result_or_an_error_on_one_gpu_names_that_gpu(tmp_path):
    """CUDA's GPU 1 is NVML's GPU 3 here (another CUDA_VISIBLE_DEVICES): its failures name GPU3 and its slot;
    its wrong result is no measurement (nothing judges the speed of a wrong answer) but is kept in the facts."""
    from orchestrator.qualify import micro
    from orchestrator.qualify.catalog import default_registry
    from orchestrator.qualify.devices import Gpu
    from orchestrator.qualify.probe_lines import ProbeRun
    from orchestrator.results.qualification import Status
    from orchestrator.results.records import Exit
    from orchestrator.runners.outcome import JobOutcome
    from tests.qualify.nodes import suite_of

    def result(metric: str, gpu: int, passed: bool, detail: str) -> str:
        return protocol.line("result", check="gemm", metric=metric, gpu=gpu,
                             sanity={"passed": passed, "detail": detail},
                             performance={"value": 600.0, "unit": "TFLOP/s", "better": "higher", "detail": "timed"})

    gpus = {0: Gpu(index=2, pci_bus_id="00000000:3B:00.0"), 1: Gpu(index=3, pci_bus_id="00000000:5E:00.0")}
    probe = ProbeRun(outcome=JobOutcome(job_id="pid:1", exit=Exit(code=0), log=tmp_path / "out",
                                        timed_out=False, lost="", seconds=1.0))
    for line in (protocol.line("device", protocol=protocol.PROTOCOL, device="cuda", gpu_count=2),
                 result("gemm_bf16_5124x9124x2560_gpu0", 0, True, "max relative error 0.001"),
                 result("gemm_bf16_5124x9124x2560_gpu1", 1, False, "max relative error 0.4"),
                 protocol.line("error", check="gemm", metric="gemm_fp32_5124x9124x2560_gpu1",
                               error="RuntimeError: CUDA error: an illegal memory access was encountered"),
                 protocol.line("timing", check="gemm", seconds=1.0)):
        probe.observe(line)
    suite = suite_of(cuda={"gemm": {"dtypes": ["bf16"], "dense": [[5124, 9124, 2560]]}})
    (gemm_check,) = micro.probe_checks(probe, suite, default_registry(), gpus)
    assert gemm_check.status is Status.FAIL and gemm_check.sanity is Status.FAIL
    assert gemm_check.reasons[0] == ("gemm_bf16_5124x9124x2560_gpu3 on GPU3 (00000000:5E:00.0): wrong result"
                                     " (max relative error 0.4)")
    assert gemm_check.reasons[1].startswith("gemm_fp32_5124x9124x2560_gpu3 on GPU3 (00000000:5E:00.0): CUDA runtime"
                                            " error")
    assert [m.metric for m in gemm_check.measurements] == ["gemm_bf16_5124x9124x2560_gpu2"]
    assert gemm_check.facts["wrong_results"] == {"gemm_bf16_5124x9124x2560_gpu3": {"value": 600.0, "unit": "TFLOP/s"}}
    assert gemm_check.facts["sanity"]["gemm_bf16_5124x9124x2560_gpu2"] == "max relative error 0.001"
