"""Throughput mode: timed training steps of the unet3d model, and the input pipeline's rate beside them.

    python -m workloads.unet3d.throughput --steps 20 --warmup-steps 5 [--data-dir DIR] [model knobs]
    STEPS=20 WARMUP_STEPS=5 DATADIR=... bash workloads/unet3d/throughput.sh      # the contract's entry

``--warmup-steps`` untimed steps (compilation, cuDNN autotuning, allocator growth), then ``--steps``
timed ones, the device synchronised around the timed region only (per-step times come from CUDA
events, so the host never waits inside it). A step is what training does: the batch copied from
pinned memory, augmented on the device, forward, backward, optimizer step. Without a dataset the
batches are random tensors; with one, the input pipeline alone is then timed for as many batches
(after as many warm-up batches) with the run's workers, and compared with the step rate.

Prints ``resolved_settings`` and, last, one ``:::MLLOG`` line with key ``throughput`` (value:
samples/s over all processes). Exit 0; 2 with one line on bad input. Out of memory is left to
PyTorch's own message (the orchestrator classifies it).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import torch

from workloads.common import throughput, timing
from workloads.common.cli import Parser, run_main
from workloads.common.devices import pick_device
from workloads.common.distributed import Context, all_reduce_sum, env_rank, joined
from workloads.common.errors import DataError, SettingsError
from workloads.common.mllog import RESOLVED_SETTINGS, THROUGHPUT, MlperfLog
from workloads.unet3d.augment import BalancedCrop
from workloads.unet3d.config import TrainConfig, auto_bool, auto_int, default, int_list, precision_arg, triple
from workloads.unet3d.data_loader import (
    LoaderSettings,
    ShardedShuffleSampler,
    TrainDataset,
    check_shapes,
    train_loader,
)
from workloads.unet3d.knobs import THROUGHPUT_KNOBS, add_step_knobs, env_argv, step_knobs
from workloads.unet3d.model import CLOSED_FILTERS, UNet3DConfig
from workloads.unet3d.settings import RunSettings, resolve_settings
from workloads.unet3d.split import list_dataset, load_split
from workloads.unet3d.step import Trainer, build_trainer, random_batch, to_device, train_step


def build_parser() -> argparse.ArgumentParser:
    """The options (defaults: training's, ``config.default``); the environment's knobs come first
    (``knobs.THROUGHPUT_KNOBS``), so that an option given wins."""
    p = Parser(prog="python -m workloads.unet3d.throughput", description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup-steps", type=int, default=5)
    p.add_argument("--data-dir", default="", help="a preprocessed dataset: also time the input pipeline")
    p.add_argument("--filters", type=int_list, default=CLOSED_FILTERS)
    p.add_argument("--input-shape", type=triple, default=default("input_shape"))
    p.add_argument("--batch-size", type=int, default=default("batch_size"))
    p.add_argument("--learning-rate", type=float, default=default("learning_rate"))
    p.add_argument("--oversampling", type=float, default=default("oversampling"))
    p.add_argument("--amp", type=precision_arg, default=default("precision"))
    p.add_argument("--channels-last", type=auto_bool, nargs="?", const=True, default=None)
    p.add_argument("--compile", action="store_true")
    add_step_knobs(p)
    p.add_argument("--num-workers", type=auto_int, default=None)
    p.add_argument("--threads", type=auto_int, default=None)
    return p


def timed_steps(trainer: Trainer, batch: tuple[torch.Tensor, torch.Tensor], steps: int, warmup: int,
                settings: RunSettings) -> tuple[float, list[float]]:
    """(wall seconds of ``steps`` steps, each step's milliseconds) after ``warmup`` untimed steps."""
    trainer.model.train()

    def step() -> None:
        train_step(trainer, *to_device(batch, settings))

    for _ in range(warmup):
        step()
    return timing.timed_steps(step, steps, settings.device)


def loader_rate(data_dir: Path, config: TrainConfig, settings: RunSettings, ctx: Context, steps: int,
                warmup: int) -> float:
    """Samples/s this process's input pipeline delivers alone (``steps`` batches after ``warmup``)."""
    listing = list_dataset(data_dir)
    train_ids, _ = load_split(data_dir, listing)
    check_shapes(data_dir, train_ids, config.input_shape)
    sampler = ShardedShuffleSampler(len(train_ids), config.batch_size * ctx.world_size, ctx.rank, ctx.world_size, 0)
    crop = BalancedCrop(patch=config.input_shape, oversampling=config.oversampling)
    loader = train_loader(TrainDataset(data_dir, train_ids, crop), sampler,
                          LoaderSettings(batch_size=config.batch_size, num_workers=settings.num_workers,
                                         pin_memory=settings.pin_memory))

    def batches():
        epoch = 0
        while True:
            epoch += 1
            sampler.set_epoch(epoch)
            yield from loader

    stream = batches()
    for _ in range(warmup):
        next(stream)
    start = time.perf_counter()
    for _ in range(steps):
        next(stream)
    return steps * config.batch_size / (time.perf_counter() - start)


def measure(args: argparse.Namespace, config: TrainConfig, log: MlperfLog, ctx: Context) -> None:
    settings = resolve_settings(device=ctx.device, requested_precision=config.precision, threads=config.threads,
                                nproc=ctx.local_world_size, channels_last=config.channels_last,
                                compile_model=config.compile, num_workers=config.num_workers, eval_batch=None,
                                knobs=config.step)
    torch.set_num_threads(settings.threads)
    log.event(RESOLVED_SETTINGS, settings.log_value())
    trainer = build_trainer(config, settings, ctx)
    batch = random_batch(config.batch_size, config.input_shape, ctx.device, seed=ctx.rank)
    wall, per_step = timed_steps(trainer, batch, args.steps, args.warmup_steps, settings)
    global_batch = config.batch_size * ctx.world_size
    rate = args.steps * global_batch / wall
    loader = None
    if throughput.holds_data(args.data_dir):
        per_process = loader_rate(Path(args.data_dir), config, settings, ctx, args.steps, args.warmup_steps)
        loader = float(all_reduce_sum(torch.tensor([per_process], dtype=torch.float64), ctx).item())
    log.event(THROUGHPUT, rate, metadata=throughput.metadata(
        per_step_ms=per_step, steps=args.steps, warmup_steps=args.warmup_steps, batch_size=config.batch_size,
        global_batch_size=global_batch, rate=rate, loader_rate=loader, precision=settings.precision,
        device_name=settings.device_name))


def configure(args: argparse.Namespace) -> TrainConfig:
    """The run's config from the arguments; SettingsError or DataError on bad input."""
    if args.steps < 1 or args.warmup_steps < 0:
        raise SettingsError(f"steps must be >= 1 and warm-up steps >= 0, got {args.steps} and {args.warmup_steps}")
    if args.data_dir and not Path(args.data_dir).is_dir():
        raise DataError(f"{args.data_dir}: no such dataset folder")
    try:
        return TrainConfig(data_dir=Path(args.data_dir or "."), results_dir=Path("."),
                           model=UNet3DConfig(filters=tuple(args.filters)), batch_size=args.batch_size,
                           input_shape=args.input_shape, val_input_shape=args.input_shape,
                           learning_rate=args.learning_rate, oversampling=args.oversampling, precision=args.amp,
                           channels_last=args.channels_last, compile=args.compile, step=step_knobs(args),
                           num_workers=args.num_workers,
                           threads=args.threads)
    except ValueError as err:  # the model's and TrainConfig's checks of the values given
        raise SettingsError(str(err)) from None


def _main(argv: Sequence[str] | None) -> None:
    given = sys.argv[1:] if argv is None else argv
    args = build_parser().parse_args([*env_argv(os.environ, THROUGHPUT_KNOBS), *given])
    config = configure(args)
    with MlperfLog(enabled=env_rank() == 0) as log, joined(pick_device("auto")) as ctx:
        measure(args, config, log, ctx)


def main(argv: Sequence[str] | None = None) -> int:
    return run_main(lambda: _main(argv), prefix="unet3d throughput")


if __name__ == "__main__":
    sys.exit(main())
