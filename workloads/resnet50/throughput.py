"""Throughput mode: timed training steps, then the input pipeline alone (for ``mltrain qualify`` and benchmarks).

    STEPS=20 WARMUP_STEPS=5 DATADIR=/data bash workloads/resnet50/throughput.sh
    python -m workloads.resnet50.throughput --steps 20 --warmup 5 [--data D] [--preset smoke] [--set NAME=VALUE ...]

Runs WARMUP_STEPS untimed then STEPS timed training steps (forward, backward, optimizer) of the
configured model on one random batch already on the device (model-bound: no input pipeline),
synchronising the device only around the timed region (CUDA events time each step). With a
dataset it then times the training input pipeline alone (decode, augmentation, copy to the device)
for as many batches. Prints ``resolved_settings`` and, last, one ``throughput`` MLLOG line whose value
is samples/s over all processes. Exit 2 with one line on bad input; an out-of-memory error is
left as PyTorch prints it.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import torch
from torch import nn

from workloads.common import distributed, throughput
from workloads.common.cli import Parser, run_main
from workloads.common.devices import pick_device
from workloads.common.errors import SettingsError
from workloads.common.mllog import RESOLVED_SETTINGS, THROUGHPUT, MlperfLog
from workloads.common.timing import synchronize, timed_steps
from workloads.resnet50.config import (
    INPUT_SHAPE_ENV,
    PRESETS,
    TrainConfig,
    build,
    env_assignments,
    env_count,
    preset_from,
)
from workloads.resnet50.data_loader import DeviceBatch, Normalizer
from workloads.resnet50.engine import build_network, train_step
from workloads.resnet50.layout import list_dataset
from workloads.resnet50.pipeline import build_pipelines
from workloads.resnet50.runtime import Setup, resolve_setup

RANDOM_CLASSES = 1000
"""Classes of the random batches when no dataset is given (ImageNet's)."""


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = Parser(prog="python -m workloads.resnet50.throughput", description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=None, help="timed training steps (default: $STEPS, else 20)")
    parser.add_argument("--warmup", type=int, default=None,
                        help="untimed steps before them (default: $WARMUP_STEPS, else 5)")
    parser.add_argument("--data", default="",
                        help="dataset: also time the input pipeline alone (an empty folder: random batches only)")
    parser.add_argument("--preset", choices=sorted(PRESETS), default=None,
                        help="starting configuration (default: as train's, from the environment)")
    parser.add_argument("--input-shape", default=None,
                        help="crop side N (or N,N): the steps' image size (default: $INPUT_SHAPE, else the preset's)")
    parser.add_argument("--set", nargs="*", default=[], metavar="NAME=VALUE",
                        help="override TrainConfig fields (after the environment's, as train's)")
    return parser.parse_args(argv)


def shape_settings(text: str) -> list[str]:
    """TrainConfig assignments for INPUT_SHAPE ('N' or 'N,N': square crops only)."""
    if not text:
        return []
    parts = text.replace("x", ",").split(",")
    if not all(part.strip().isdigit() for part in parts) or len(set(parts)) != 1 or len(parts) > 2:
        raise SettingsError(f"INPUT_SHAPE must be N or N,N (square crops), got {text!r}")
    side = int(parts[0])
    return [f"crop={side}", f"eval_resize={max(side, round(side * 256 / 224))}"]


def model_bound(config: TrainConfig, setup: Setup, context: distributed.Context, classes: int, *, steps: int,
                warmup: int) -> tuple[float, list[float]]:
    """Timed training steps on one random batch already on the device."""
    built = build_network(config, classes, context)
    model, network, optimizer = built.model, built.network, built.optimizer
    criterion = nn.CrossEntropyLoss(label_smoothing=config.label_smoothing)
    scaler = setup.precision.scaler(context.device)
    normalizer = Normalizer(context.device, channels_last=config.channels_last)
    generator = torch.Generator(device=context.device).manual_seed(context.rank)
    pixels = torch.randint(0, 256, (config.batch_size, 3, config.crop, config.crop), dtype=torch.uint8,
                           device=context.device, generator=generator)
    labels = torch.randint(0, classes, (config.batch_size,), device=context.device, generator=generator)
    lr = config.base_lr / 10

    def step() -> None:
        batch = DeviceBatch(normalizer(pixels), labels, config.batch_size, 0)
        train_step(network, batch, optimizer, criterion, lr, setup.precision, scaler)

    model.train()
    for _ in range(warmup):
        step()
    return timed_steps(step, steps, context.device)


def pipeline_bound(config: TrainConfig, setup: Setup, context: distributed.Context, data: Path, *,
                   batches: int) -> float:
    """Samples/s of this rank's training input pipeline alone (after its first batch, which starts it)."""
    train_split, val_split = list_dataset(data)
    pipeline, _ = build_pipelines(config, setup.decode, train_split, val_split, context, seed=0)
    pipeline.set_epoch(1)
    seen, epoch = 0, 1
    iterator = iter(pipeline)
    next(iterator)
    synchronize(context.device)
    started = time.perf_counter()
    for _ in range(batches):
        try:
            batch = next(iterator)
        except StopIteration:
            epoch += 1
            pipeline.set_epoch(epoch)
            iterator = iter(pipeline)
            batch = next(iterator)
        seen += batch.count
    synchronize(context.device)
    return seen / (time.perf_counter() - started)


def run(args: argparse.Namespace, context: distributed.Context, config: TrainConfig) -> None:
    with MlperfLog(enabled=context.is_main) as log:
        setup = resolve_setup(config, context)
        log.event(RESOLVED_SETTINGS, setup.settings)
        classes = len(list_dataset(args.data)[0].classes) if args.data else RANDOM_CLASSES
        seconds, per_step = model_bound(config, setup, context, classes, steps=args.steps, warmup=args.warmup)
        global_batch = config.batch_size * context.world_size
        rate = args.steps * global_batch / seconds
        loader_rate = None
        if args.data:
            per_rank = pipeline_bound(config, setup, context, args.data, batches=args.steps)
            loader_rate = float(distributed.all_reduce_sum(torch.tensor([per_rank], dtype=torch.float64),
                                                           context).item())
        log.event(THROUGHPUT, rate, metadata=throughput.metadata(
            per_step_ms=per_step, steps=args.steps, warmup_steps=args.warmup, batch_size=config.batch_size,
            global_batch_size=global_batch, rate=rate, loader_rate=loader_rate,
            precision=setup.settings["precision"], device_name=setup.settings["device_name"]))


def _main(argv: list[str] | None) -> None:
    args = parse_args(argv)
    env = os.environ
    args.steps = env_count(env, "STEPS") if args.steps is None else args.steps
    args.warmup = env_count(env, "WARMUP_STEPS") if args.warmup is None else args.warmup
    if args.steps < 1 or args.warmup < 0:
        raise SettingsError(f"STEPS must be >= 1 and WARMUP_STEPS >= 0, got {args.steps} and {args.warmup}")
    args.data = Path(args.data) if throughput.holds_data(args.data) else None
    shape = args.input_shape if args.input_shape is not None else env.get(INPUT_SHAPE_ENV, "")
    config = build(args.preset or preset_from(env), distributed.env_world_size(),
                   [*env_assignments(env), *shape_settings(shape), *args.set])
    with distributed.joined(pick_device(config.device)) as context:
        run(args, context, config)


def main(argv: list[str] | None = None) -> int:
    return run_main(lambda: _main(argv), prefix="resnet50 throughput")


if __name__ == "__main__":
    sys.exit(main())
