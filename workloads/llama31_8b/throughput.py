"""Throughput mode: timed training steps of the configured shape (for ``mltrain qualify`` and benchmarks).

    STEPS=20 WARMUP_STEPS=5 bash workloads/llama31_8b/throughput.sh
    python -m workloads.llama31_8b.throughput --steps 20 --warmup 5 [--data D] [--set layers=8 ...]

Runs WARMUP_STEPS untimed then STEPS timed optimizer steps (each ``global_batch / processes``
sequences per process, in micro-batches) of the configured model, by default the real Llama 3.1 8B
at sequence 8192, on random tokens already on the device (model-bound), synchronising the device
only around the timed region. With a dataset it then times reading as many batches alone.
The last line is one ``throughput`` MLLOG event: samples (sequences)/s over all processes, and in its
metadata tokens/s, tokens/s per device, the model's TFLOPS per device (``Shape.train_flops_per_token``:
6 per matmul parameter plus causal attention, no recomputation counted) and MFU against the device's
dense bf16 peak where ``PEAK_TFLOPS`` gives it or the device is one of ``DENSE_BF16_TFLOPS``
(else null: unknown). Exit 2 with one line on bad input; an out-of-memory error is left as PyTorch
prints it.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import torch

from workloads.common import distributed, throughput
from workloads.common.cli import Parser, run_main
from workloads.common.devices import pick_device
from workloads.common.errors import SettingsError
from workloads.common.mllog import RESOLVED_SETTINGS, THROUGHPUT, MlperfLog
from workloads.common.timing import timed_steps
from workloads.llama31_8b import engine, sequences
from workloads.llama31_8b.config import PRESETS, TrainConfig, build, env_assignments, env_count, preset_from
from workloads.llama31_8b.runtime import resolve_setup

PEAK_ENV = "PEAK_TFLOPS"
"""The device's dense peak in TFLOPS at the run's precision, for MFU (overrides the table)."""
DENSE_BF16_TFLOPS = {
    "H100 80GB HBM3": 989.5,  # NVIDIA H100 datasheet (2023), SXM: BF16 tensor 1,979 with sparsity, dense half
    "H200": 989.5,  # NVIDIA H200 datasheet (2024): BF16 tensor 1,979 with sparsity, dense half
    "A100-SXM4": 312.0,  # NVIDIA A100 datasheet (2021): BF16 tensor 312 dense
    "B200": 2250.0,  # NVIDIA DGX B200 datasheet (2024): 72 PFLOPS FP8 for 8 GPUs with sparsity; BF16 dense 2.25
}
"""Dense bf16 tensor peaks by a part of the CUDA device name (bf16 runs only; sources beside each)."""


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = Parser(prog="python -m workloads.llama31_8b.throughput", description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=None, help="timed steps (default: $STEPS, else 20)")
    parser.add_argument("--warmup", type=int, default=None, help="untimed steps first (default: $WARMUP_STEPS, else 5)")
    parser.add_argument("--data", default="", help="dataset: also time reading batches alone")
    parser.add_argument("--preset", choices=sorted(PRESETS), default=None)
    parser.add_argument("--set", nargs="*", default=[], metavar="NAME=VALUE", help="override TrainConfig fields")
    return parser.parse_args(argv)


def peak_override(env: dict[str, str]) -> float | None:
    """``PEAK_TFLOPS`` as a number (None when unset); SettingsError, before anything runs, otherwise."""
    text = env.get(PEAK_ENV, "").strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise SettingsError(f"{PEAK_ENV} must be a positive number of TFLOPS, got {text!r}")
    return value


def peak_tflops(device_name: str, precision: str, override: float | None) -> float | None:
    """The dense peak the MFU divides by: ``PEAK_TFLOPS``, else the table's for a bf16 run, else None."""
    if override is not None:
        return override
    if precision != "bf16":
        return None
    return next((peak for part, peak in DENSE_BF16_TFLOPS.items() if part in device_name), None)


def loader_rate(data: Path, config: TrainConfig, context: distributed.Context, batches: int) -> float:
    """Sequences/s over all processes of reading ``batches`` batches from the dataset alone."""
    stream = sequences.TrainStream(sequences.open_train(data, config.shards), config.seq_len, seed=0)
    share = config.global_batch // context.world_size
    started = time.perf_counter()
    for step in range(batches):
        torch.from_numpy(stream.batch(step, config.global_batch, context.rank, share)).to(context.device)
    return batches * config.global_batch / (time.perf_counter() - started)


def measure(config: TrainConfig, context: distributed.Context, *, steps: int, warmup: int, data: str,
            peak_given: float | None) -> None:
    with MlperfLog(enabled=context.is_main) as log:
        setup = resolve_setup(config, context)
        log.event(RESOLVED_SETTINGS, setup.settings)
        config.accumulation(context.world_size)
        share = config.global_batch // context.world_size
        torch.manual_seed(0)
        model, optimizer = engine.build(config, context)
        scaler = engine.scaler_for(setup.precision, context)
        batch = torch.randint(0, config.vocab, (share, config.seq_len + 1), device=context.device)
        schedule = engine.schedule_of(config)

        def step() -> None:
            engine.train_step(model, optimizer, batch, lr=schedule.lr(config.warmup_steps), config=config,
                              precision=setup.precision, scaler=scaler)

        for _ in range(warmup):
            step()
        seconds, per_step = timed_steps(step, steps, context.device)
        rate = steps * config.global_batch / seconds
        loaded = loader_rate(Path(data), config, context, steps) if throughput.holds_data(data) else None
        tokens = rate * config.seq_len
        per_device = tokens / context.world_size
        tflops = per_device * config.shape.train_flops_per_token() / 1e12
        peak = peak_tflops(setup.device_name, setup.precision, peak_given)
        meta = throughput.metadata(per_step_ms=per_step, steps=steps, warmup_steps=warmup,
                                   batch_size=share, global_batch_size=config.global_batch, rate=rate,
                                   loader_rate=loaded, precision=setup.precision, device_name=setup.device_name)
        meta.update({"seq_len": config.seq_len, "layers": config.layers,
                     "tokens_per_second": tokens, "tokens_per_second_per_device": per_device,
                     "model_tflops_per_device": tflops, "peak_tflops": peak,
                     "mfu": None if peak is None else tflops / peak,
                     "activation_checkpointing": config.checkpointing, "micro_batch": config.micro_batch})
        log.event(THROUGHPUT, rate, metadata=meta)


def _main(argv: list[str] | None) -> None:
    args = parse_args(argv)
    env = dict(os.environ)
    steps = args.steps if args.steps is not None else env_count(env, "STEPS")
    warmup = args.warmup if args.warmup is not None else env_count(env, "WARMUP_STEPS")
    if steps < 1:
        raise SettingsError(f"STEPS must be at least 1, got {steps}")
    config = build(args.preset or preset_from(env), [*env_assignments(env), *args.set])
    peak_given = peak_override(env)
    with distributed.joined(pick_device(config.device)) as context:
        measure(config, context, steps=steps, warmup=warmup, data=args.data, peak_given=peak_given)


def main(argv: list[str] | None = None) -> int:
    return run_main(lambda: _main(argv), prefix="llama31_8b")


if __name__ == "__main__":
    sys.exit(main())
