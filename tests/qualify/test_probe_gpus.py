"""The probe measures every visible GPU (issue 18): the largest dense GEMM of each dtype and the device
memory copy run on each GPU of a node of two or more, reported per GPU (``_gpu<i>`` and ``"gpu": i``), so
that one slow GPU of eight fails; the other cases stay on cuda:0. Without a GPU here, the probe's own
planning is run with its kernels replaced by a recorder."""

from __future__ import annotations

import json

import pytest
import torch

from orchestrator.qualify import probe as probe_module

SPEC = {"gemm": {"dtypes": ["fp32", "bf16"], "dense": [[3072, 128, 1024], [5124, 9124, 2560], [2560, 64, 2560]]},
        "memory": {"host_mb": 1, "device_mb": 2, "copy_mb": 1}}


def planned(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], gpus: int) -> list[tuple]:
    """(check, metric, CUDA device) of every case the probe runs on a node of ``gpus`` CUDA devices (device
    None: a case of cuda:0 under its plain name)."""
    probe = probe_module.Probe({"device": "cpu", "cpu": SPEC}, seed=1)
    probe.cuda, probe.gpu_count, probe.kind = True, gpus, "cuda"
    ran: list[tuple] = []
    monkeypatch.setattr(probe, "dtype", lambda name: (torch.float32, None))
    monkeypatch.setattr(probe, "dense",
                        lambda metric, name, dtype, m, n, k, gpu=None: ran.append(("gemm", metric, gpu)))
    monkeypatch.setattr(probe, "copy_rate", lambda metric, source, what, gpu=None: ran.append(("memory", metric, gpu)))
    monkeypatch.setattr(probe, "device_copy", lambda metric, mb, gpu: ran.append(("memory", metric, gpu)),
                        raising=False)
    monkeypatch.setattr(probe, "transfer", lambda metric, mb, to_device: ran.append(("memory", metric, None)))
    probe.gemm()
    probe.memory()
    assert "error" not in capsys.readouterr().out
    return ran


def test_the_largest_gemm_of_each_dtype_and_the_memory_copy_run_on_every_gpu(monkeypatch, capsys):
    ran = planned(monkeypatch, capsys, gpus=8)
    for dtype in ("fp32", "bf16"):
        assert [(m, g) for c, m, g in ran if m.startswith(f"gemm_{dtype}_5124x9124x2560")] == [
            (f"gemm_{dtype}_5124x9124x2560_gpu{i}", i) for i in range(8)]
        assert ("gemm", f"gemm_{dtype}_3072x128x1024", None) in ran  # the smaller cases: cuda:0, as before
    assert [(m, g) for c, m, g in ran if m.startswith("device_copy")] == [
        (f"device_copy_GBps_gpu{i}", i) for i in range(8)]
    assert ("memory", "h2d_pinned_GBps", None) in ran


def test_one_gpu_keeps_the_plain_names(monkeypatch, capsys):
    ran = planned(monkeypatch, capsys, gpus=1)
    assert ("gemm", "gemm_bf16_5124x9124x2560", None) in ran and ("memory", "device_copy_GBps", None) in ran
    assert not [m for _, m, _ in ran if "_gpu" in m]


def test_a_per_gpu_result_line_says_which_gpu(monkeypatch, capsys):
    probe = probe_module.Probe({"device": "cpu", "cpu": SPEC}, seed=1)
    probe.dense("gemm_fp32_64x64x64_gpu3", "fp32", torch.float32, 64, 64, 64, gpu=3)
    line = json.loads(capsys.readouterr().out.removeprefix(probe_module.PREFIX))
    assert line["metric"] == "gemm_fp32_64x64x64_gpu3" and line["gpu"] == 3 and line["sane"] is True


def test_a_wrong_result_or_an_error_on_one_gpu_names_that_gpu(tmp_path):
    """CUDA's GPU 1 is NVML's GPU 3 here (another CUDA_VISIBLE_DEVICES): its failures name GPU3 and its slot."""
    from orchestrator.qualify import micro
    from orchestrator.qualify.config import DeviceSuite, GemmSpec, Suite
    from orchestrator.qualify.devices import Gpu
    from orchestrator.qualify.jobs import StepOutcome
    from orchestrator.results.qualification import Status
    from orchestrator.results.records import Exit

    gpus = {0: Gpu(index=2, pci_bus_id="00000000:3B:00.0"), 1: Gpu(index=3, pci_bus_id="00000000:5E:00.0")}
    probe = micro.ProbeRun(outcome=StepOutcome(exit=Exit(code=0), output=tmp_path / "out", timed_out=False,
                                               seconds=1.0))
    for line in ({"kind": "device", "device": "cuda", "gpu_count": 2},
                 {"kind": "result", "check": "gemm", "metric": "gemm_bf16_5124x9124x2560_gpu0", "gpu": 0,
                  "value": 600.0, "unit": "TFLOP/s", "sane": True},
                 {"kind": "result", "check": "gemm", "metric": "gemm_bf16_5124x9124x2560_gpu1", "gpu": 1,
                  "value": 600.0, "unit": "TFLOP/s", "sane": False, "detail": "max relative error 0.4"},
                 {"kind": "error", "check": "gemm", "metric": "gemm_fp32_5124x9124x2560_gpu1",
                  "error": "RuntimeError: CUDA error: an illegal memory access was encountered"},
                 {"kind": "timing", "check": "gemm", "seconds": 1.0}):
        probe.observe(probe_module.PREFIX + json.dumps(line))
    suite = Suite(cuda=DeviceSuite(gemm=GemmSpec(dtypes=("bf16",), dense=((5124, 9124, 2560),))))
    (gemm,) = micro.probe_checks(probe, suite, gpus)
    assert gemm.status is Status.FAIL
    assert gemm.reasons[0] == ("gemm_bf16_5124x9124x2560_gpu3 on GPU3 (00000000:5E:00.0): wrong result"
                               " (max relative error 0.4)")
    assert gemm.reasons[1].startswith("gemm_fp32_5124x9124x2560_gpu3 on GPU3 (00000000:5E:00.0): CUDA runtime error")
    assert [m.metric for m in gemm.measurements] == ["gemm_bf16_5124x9124x2560_gpu2", "gemm_bf16_5124x9124x2560_gpu3"]
