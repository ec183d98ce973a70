"""The probe's dtypes follow the workloads' precision rule (issue 18 item 5), and an out-of-memory case
is an error line on any torch the images carry (item 6: torch.OutOfMemoryError exists from 2.4 only;
the default base image, NGC 24.04, has torch 2.3)."""

from __future__ import annotations

import json

import pytest
import torch

from workloads.common.probe import dtypes, harness, protocol
from workloads.common.probe.device import Device


def on_gpu(monkeypatch: pytest.MonkeyPatch, capability: tuple[int, int]) -> Device:
    """A GPU of ``capability`` whose torch counts emulated bf16 (V100, T4)."""
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=0: capability)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)  # what torch says on a V100
    return Device(kind="cuda", gpu_count=1)


@pytest.mark.parametrize(("capability", "native", "refused"), [
    ((7, 0), {"fp32": torch.float32, "fp16": torch.float16}, {"bf16": "no native bf16 on Volta (compute capability"
                                                                      " 7.0)", "tf32": "no native tf32 on Volta"}),
    ((7, 5), {"fp16": torch.float16}, {"bf16": "no native bf16 on Turing", "tf32": "no native tf32 on Turing"}),
    ((8, 0), {"bf16": torch.bfloat16, "tf32": torch.float32, "fp16": torch.float16}, {}),
    ((9, 0), {"bf16": torch.bfloat16, "tf32": torch.float32, "fp16": torch.float16}, {}),
    ((6, 1), {"fp32": torch.float32}, {"fp16": "no native fp16 on Pascal", "bf16": "no native bf16 on Pascal"}),
])
def test_the_probe_runs_natively_what_the_generation_runs_natively(monkeypatch, capability, native, refused):
    device = on_gpu(monkeypatch, capability)
    for name, dtype in native.items():
        assert dtypes.native(device, name) == (dtype, None), name
    for name, why in refused.items():
        got, reason = dtypes.native(device, name)
        assert got is None and reason.startswith(why), (name, reason)


def test_an_out_of_memory_case_is_an_error_line_on_torch_before_2_4(monkeypatch, capsys):
    monkeypatch.delattr(torch, "OutOfMemoryError", raising=False)  # as torch 2.3 is

    def measure() -> protocol.Outcome:
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    harness.run_case(harness.Case(check="gemm", metric="gemm_fp16_5124x9124x2560", measure=measure),
                     Device(kind="cpu"))
    captured = capsys.readouterr()
    line = json.loads(captured.out.removeprefix(protocol.PREFIX))
    assert line["kind"] == "error" and line["error"].startswith("torch.OutOfMemoryError: CUDA out of memory")
    assert captured.err.startswith("torch.OutOfMemoryError: CUDA out of memory")  # for the classifier
