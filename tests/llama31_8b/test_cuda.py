"""The CUDA paths on a real GPU (run by the GPU session's cuda-marked tests; skipped without CUDA):
auto precision resolves to the GPU's, a bf16 step of a small Llama trains, the throughput mode
reports tokens/s per device and an MFU on a listed GPU."""

from __future__ import annotations

import contextlib
import io
import json

import pytest
import torch

from workloads.common.distributed import Context
from workloads.llama31_8b import engine, throughput
from workloads.llama31_8b.config import build
from workloads.llama31_8b.runtime import resolve_setup

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]
GPU = torch.device("cuda", 0)
SMALL = ["vocab=32000", "dim=512", "layers=2", "heads=8", "kv_heads=2", "ffn=1536", "seq_len=1024",
         "global_batch=4", "micro_batch=2", "base_lr=1e-3", "warmup_samples=0", "threads=1"]


def test_auto_precision_is_bf16_where_the_gpu_has_it_and_a_bf16_step_trains():
    config = build("closed", SMALL)
    context = Context(device=GPU)
    setup = resolve_setup(config, context)
    major, _ = torch.cuda.get_device_capability(GPU)
    assert setup.precision == ("bf16" if major >= 8 else "fp16" if major >= 7 else "fp32")
    torch.manual_seed(0)
    model, optimizer = engine.build(config, context)
    scaler = engine.scaler_for(setup.precision, context)
    batch = torch.randint(0, 64, (4, config.seq_len + 1), device=GPU)  # 64 tokens: learnable in a few steps
    losses = [float(engine.train_step(model, optimizer, batch, lr=1e-3, config=config, precision=setup.precision,
                                      scaler=scaler).loss) for _ in range(8)]
    assert all(map(torch.isfinite, map(torch.tensor, losses))) and losses[-1] < losses[0] - 1.0, losses


def test_the_throughput_mode_reports_tokens_per_device_and_mfu(monkeypatch):
    monkeypatch.setenv("PEAK_TFLOPS", "100")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert throughput.main(["--steps", "3", "--warmup", "1", "--preset", "closed", "--set", *SMALL]) == 0
    last = json.loads(out.getvalue().strip().splitlines()[-1].split(":::MLLOG ", 1)[1])
    meta = last["metadata"]
    assert last["key"] == "throughput" and meta["tokens_per_second_per_device"] == pytest.approx(last["value"] * 1024)
    assert meta["peak_tflops"] == 100 and meta["mfu"] == pytest.approx(meta["model_tflops_per_device"] / 100)
