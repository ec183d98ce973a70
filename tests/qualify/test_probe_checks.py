"""Each probe check's sanity function on the CPU, apart from its numbers (ReFrame style): the right
result passes, a wrong one (one corrupted element, a short read, a bad sum) fails; and each check's
cases run here, each with both a sanity verdict and a number on its result line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from workloads.common.probe import conv, gemm, harness, memory, nccl, protocol, registry, storage
from workloads.common.probe.device import Device


def test_a_wrong_product_fails_the_gemm_sanity():
    a, b = torch.randn(64, 32), torch.randn(32, 16)
    out = a @ b
    assert gemm.product_sanity(a, b, out, gemm.TOLERANCE["fp32"]).passed
    out[3, 5] += 0.05 * out[:gemm.CHECKED_ROWS].abs().max()  # one element off: silent data corruption
    wrong = gemm.product_sanity(a, b, out, gemm.TOLERANCE["fp32"])
    assert not wrong.passed and wrong.detail.startswith("max relative error 0.05 (tolerance 0.0001)")
    out[3, 5] = float("nan")
    assert not gemm.product_sanity(a, b, out, 1.0).passed  # not finite: wrong whatever the tolerance


def test_a_wrong_sparse_product_fails_the_gemm_sanity():
    generator = torch.Generator().manual_seed(0)
    dense = torch.randn(16, 32, generator=generator)
    dense[torch.rand(16, 32, generator=generator) < 0.9] = 0.0
    dense[0, 0] = 1.0  # the row the test corrupts has a product to lose (a random row may be all zeros)
    b = torch.randn(32, 4, generator=generator)
    out = dense.to_sparse_csr() @ b
    assert gemm.sparse_sanity(dense, b, out).passed
    out[0] = 0.0
    assert not gemm.sparse_sanity(dense, b, out).passed


@pytest.mark.parametrize(("dims", "stride", "padding"), [(2, 1, 1), (2, 2, 3), (3, 2, 1)])
def test_a_wrong_convolution_fails_the_conv_sanity(dims: int, stride: int, padding: int):
    x = torch.randn(2, 3, *([9] * dims))
    weight = torch.randn(4, 3, *([3] * dims))
    out = (F.conv2d if dims == 2 else F.conv3d)(x, weight, stride=stride, padding=padding)
    assert conv.conv_sanity(x, weight, out, stride, padding, conv.TOLERANCE["fp32"]).passed
    out[0].view(-1)[-1] += 0.1 * out[0].abs().max()  # the last output of the first image is always checked
    assert not conv.conv_sanity(x, weight, out, stride, padding, conv.TOLERANCE["fp32"]).passed


def test_a_corrupted_copy_fails_the_memory_sanity():
    source = torch.randint(0, 255, (1 << 16,), dtype=torch.uint8)
    target = source.clone()
    assert memory.copy_sanity(source, target).passed
    target[12345] ^= 1
    assert not memory.copy_sanity(source, target).passed


def test_a_short_read_fails_the_storage_sanity():
    assert storage.read_sanity(4096, 4096).passed
    assert not storage.read_sanity(4000, 4096).passed
    assert not storage.read_sanity(0, 0).passed


def test_a_wrong_sum_fails_the_nccl_sanity():
    buffers = [torch.full((1000,), 6.0) for _ in range(3)]  # 1 + 2 + 3 on every buffer
    assert nccl.all_reduce_sanity(buffers).passed
    buffers[0][999] = 5.0
    wrong = nccl.all_reduce_sanity(buffers)
    assert not wrong.passed and "buffer 0 on cpu: 1 of 1000 elements" in wrong.detail


SPECS = {"gemm": {"dtypes": ["fp32", "tf32"], "dense": [[64, 32, 48]], "sparse": [[64, 4, 32, 0.9]]},
         "conv": {"dtypes": ["fp32"], "conv2d": [[1, 4, 8, 4, 3, 1, 1]], "conv3d": [[1, 2, 6, 4, 3, 2, 1]]},
         "memory": {"host_mb": 1}, "storage": {"max_mb": 1}, "nccl": {}, "sdc": {"size": 64, "width": 16}}


def test_every_check_runs_on_the_cpu_with_its_sanity_apart_from_its_number(capsys, monkeypatch, tmp_path: Path):
    (tmp_path / "case_000.bin").write_bytes(b"x" * 5000)
    monkeypatch.setenv("DATADIR", str(tmp_path))
    cpu = Device(kind="cpu")
    context = harness.Context(device=cpu, seconds=0.01, max_repeats=3, data=True)
    for name in registry.CHECKS:  # every registered check, with its settings (else its defaults)
        check = registry.check(name)
        for case in harness.plan(check, registry.with_defaults(check.DECLARATION, SPECS.get(name, {})), context):
            harness.run_case(case, cpu)
    lines = [json.loads(out.removeprefix(protocol.PREFIX)) for out in capsys.readouterr().out.splitlines()]
    results = {line["metric"]: line for line in lines if line["kind"] == "result"}
    from orchestrator.qualify.catalog import default_registry

    declared = default_registry()
    # each registered check that a CPU meets the needs of measures something here (the probe's own rule)
    runnable = {d.name for d in declared.declarations if d.runs == "probe" and not registry.unmet(
        registry.check(d.name).DECLARATION, cuda=False, gpus=0, data=True)}
    assert {line["check"] for line in results.values()} == runnable
    assert {"gemm_fp32_64x32x48", "spmm_fp32_64x4x32_s0.9", "conv2d_fp32_n1c4s8k4r3u1", "conv3d_fp32_n1c2s6k4r3u2",
            "host_copy_GBps", "storage_read_MBps", "sdc_gemm_ms", "sdc_step_ms"} <= set(results)
    for metric, line in results.items():
        assert line["sanity"]["passed"] is True and line["sanity"]["detail"], metric
        assert line["performance"]["value"] > 0 and line["performance"]["unit"], metric
        # its check declares the metric, in the unit it is measured in (what a reference must be in)
        assert declared.declaration(line["check"]).unit(metric) == line["performance"]["unit"], metric
    skips = {line["metric"]: line["reason"] for line in lines if line["kind"] == "skip"}
    assert skips["gemm_tf32_64x32x48"] == "TF32 is a CUDA tensor-core mode; this is a CPU"
    assert skips["nccl"] == "nccl needs a CUDA device; this is a CPU"
    assert results["storage_read_MBps"]["sanity"]["detail"] == "read all 5000 bytes"
