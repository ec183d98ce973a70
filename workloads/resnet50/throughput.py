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
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

from workloads.resnet50 import distributed
from workloads.resnet50.config import PRESETS, TrainConfig, build
from workloads.resnet50.data_loader import DeviceBatch, Normalizer
from workloads.resnet50.engine import train_step
from workloads.resnet50.errors import SettingsError, WorkloadError
from workloads.resnet50.layout import list_dataset
from workloads.resnet50.mlperf_log import RESOLVED_SETTINGS, THROUGHPUT, MlperfLog
from workloads.resnet50.model import ModelConfig, ResNet50
from workloads.resnet50.optim import build_optimizer
from workloads.resnet50.pipeline import build_pipelines
from workloads.resnet50.precision import pick_device
from workloads.resnet50.runtime import Setup, resolve_setup

RANDOM_CLASSES = 1000
"""Classes of the random batches when no dataset is given (ImageNet's)."""


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m workloads.resnet50.throughput",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20, help="timed training steps")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps before them")
    parser.add_argument("--data", type=Path, default=None, help="dataset: also time the input pipeline alone")
    parser.add_argument("--preset", choices=sorted(PRESETS), default="closed", help="starting configuration")
    parser.add_argument("--input-shape", default="", help="crop side N (or N,N): the image size of the steps")
    parser.add_argument("--set", nargs="*", default=[], metavar="NAME=VALUE", help="override TrainConfig fields")
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


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))]


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed_steps(step: Callable[[], object], steps: int, device: torch.device) -> tuple[float, list[float]]:
    """(seconds for ``steps`` calls, per-step milliseconds); waits for the device at both ends only."""
    if device.type == "cuda":
        marks = [torch.cuda.Event(enable_timing=True) for _ in range(steps + 1)]
        sync(device)
        started = time.perf_counter()
        marks[0].record()
        for index in range(steps):
            step()
            marks[index + 1].record()
        sync(device)
        seconds = time.perf_counter() - started
        return seconds, [marks[i].elapsed_time(marks[i + 1]) for i in range(steps)]
    per_step = []
    started = time.perf_counter()
    for _ in range(steps):
        begun = time.perf_counter()
        step()
        per_step.append((time.perf_counter() - begun) * 1000)
    return time.perf_counter() - started, per_step


def model_bound(config: TrainConfig, setup: Setup, context: distributed.Context, classes: int, *, steps: int,
                warmup: int) -> tuple[float, list[float]]:
    """Timed training steps on one random batch already on the device."""
    model: nn.Module = ResNet50(ModelConfig(num_classes=classes, width=config.width, layers=config.layers))
    model = model.to(context.device)
    if config.channels_last:
        model = model.to(memory_format=torch.channels_last)
    optimizer = build_optimizer(config.optimizer, model, lr=config.base_lr, momentum=config.momentum,
                                weight_decay=config.weight_decay, lars_eta=config.lars_eta,
                                lars_epsilon=config.lars_epsilon)
    network = distributed.wrap(model, context)
    if config.compile:
        network = torch.compile(network)
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
    sync(context.device)
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
    sync(context.device)
    return seen / (time.perf_counter() - started)


def run(args: argparse.Namespace, context: distributed.Context, config: TrainConfig) -> None:
    log = MlperfLog(enabled=context.is_main, results_dir=None)
    try:
        setup = resolve_setup(config, context)
        log.event(RESOLVED_SETTINGS, setup.settings)
        classes = len(list_dataset(args.data)[0].classes) if args.data else RANDOM_CLASSES
        seconds, per_step = model_bound(config, setup, context, classes, steps=args.steps, warmup=args.warmup)
        global_batch = config.batch_size * context.world_size
        rate = args.steps * global_batch / seconds
        loader_rate = None
        if args.data:
            loader_rate = pipeline_bound(config, setup, context, args.data, batches=args.steps) * context.world_size
        log.event(THROUGHPUT, rate, metadata={
            "unit": "samples/s", "steps": args.steps, "warmup_steps": args.warmup, "batch_size": config.batch_size,
            "global_batch_size": global_batch, "step_ms_median": statistics.median(per_step),
            "step_ms_p10": percentile(per_step, 0.1), "step_ms_p90": percentile(per_step, 0.9),
            "loader_samples_per_second": loader_rate,
            "input_bound": None if loader_rate is None else loader_rate < rate,
            "precision": setup.settings["precision"], "device_name": setup.settings["device_name"],
        })
    finally:
        log.close()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        if args.steps < 1 or args.warmup < 0:
            raise SettingsError(f"STEPS must be >= 1 and WARMUP_STEPS >= 0, got {args.steps} and {args.warmup}")
        if args.data is not None and not str(args.data):
            args.data = None
        config = build(args.preset, int(os.environ.get("WORLD_SIZE", "1")),
                       [*shape_settings(args.input_shape), *args.set])
        device_type = pick_device(config.device)
    except WorkloadError as exc:
        sys.stderr.write(f"resnet50 throughput: {exc}\n")
        return exc.exit_code
    try:
        with distributed.joined(device_type) as context:
            run(args, context, config)
    except WorkloadError as exc:
        sys.stderr.write(f"resnet50 throughput: {exc}\n")
        return exc.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
