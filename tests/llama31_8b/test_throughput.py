"""The throughput mode through its script: the last line is the throughput event with tokens/s per
device (and MFU where a peak is given), a bad peak is one line and exit 2 before anything runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.llama31_8b.conftest import PROJECT, TINY


def run(**env: str) -> subprocess.CompletedProcess:
    full = {**os.environ, "PYTHONPATH": str(PROJECT), "NPROC": "1", "STEPS": "3", "WARMUP_STEPS": "1",
            "LLAMA31_8B_PRESET": "smoke", "LLAMA31_8B_SET": " ".join([*TINY, "global_batch=4", "micro_batch=2"]),
            "DATADIR": "", **env}
    return subprocess.run(["bash", str(PROJECT / "workloads" / "llama31_8b" / "throughput.sh")], env=full,
                          capture_output=True, text=True, timeout=120)


def test_the_last_line_is_the_throughput_event_with_tokens_per_device_and_mfu():
    result = run(PEAK_TFLOPS="2.5")
    assert result.returncode == 0, result.stderr[-2000:]
    last = json.loads(result.stdout.strip().splitlines()[-1].split(":::MLLOG ", 1)[1])
    meta = last["metadata"]
    assert last["key"] == "throughput" and meta["unit"] == "samples/s" and meta["steps"] == 3
    assert meta["global_batch_size"] == 4 and meta["seq_len"] == 32 and meta["loader_samples_per_second"] is None
    assert meta["tokens_per_second_per_device"] == meta["tokens_per_second"] == last["value"] * 32
    assert meta["peak_tflops"] == 2.5 and meta["mfu"] == meta["model_tflops_per_device"] / 2.5


def test_a_bad_peak_is_one_line_before_anything_runs():
    result = run(PEAK_TFLOPS="fast")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.strip() == "llama31_8b: PEAK_TFLOPS must be a positive number of TFLOPS, got 'fast'"


def test_the_blocks_that_fit_grow_with_the_free_memory_up_to_the_models_depth():
    from workloads.llama31_8b.fit import layers_that_fit
    from workloads.llama31_8b.model import LLAMA31_8B

    gib = 1024**3
    h200, h100 = layers_that_fit(140 * gib, LLAMA31_8B, 1), layers_that_fit(79 * gib, LLAMA31_8B, 1)
    assert 20 <= h200 < 32 and 8 <= h100 < h200  # 3.9 GB of state a block, 19 GB for the vocabulary's two
    assert layers_that_fit(16 * gib, LLAMA31_8B, 1) == 0 and layers_that_fit(2_000 * gib, LLAMA31_8B, 1) == 32
    assert layers_that_fit(140 * gib, LLAMA31_8B, 4) < h200  # four sequences' activations and logits


def test_the_fit_without_a_gpu_asks_for_the_free_memory_in_one_line():
    full = {**os.environ, "PYTHONPATH": str(PROJECT), "CUDA_VISIBLE_DEVICES": ""}
    result = subprocess.run([sys.executable, "-m", "workloads.llama31_8b.fit"], env=full, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 2 and result.stderr.strip() == "llama31_8b: no CUDA device: give --free-bytes"
    given = subprocess.run([sys.executable, "-m", "workloads.llama31_8b.fit", "--free-bytes", str(140 * 1024**3)],
                           env=full, capture_output=True, text=True, timeout=60)
    assert given.returncode == 0 and given.stdout == "24\n"
