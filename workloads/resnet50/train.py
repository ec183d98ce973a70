"""Train ResNet-50 v1.5 to a top-1 target and log it the MLPerf way (``:::MLLOG`` lines).

Run it (from the project root):

    # one seed, as the orchestrator does (the seed is the only argument)
    DATADIR=/data/imagenet RESULTS_DIR=/tmp/r50 bash workloads/resnet50/run_and_time.sh 1

    # directly: the smoke preset on a synthetic dataset
    python -m workloads.resnet50.dataset synthesize /tmp/r50-data
    python -m workloads.resnet50.train --data /tmp/r50-data --results /tmp/r50 --seed 1 --preset smoke

    # any TrainConfig field can be overridden
    python -m workloads.resnet50.train --data D --seed 1 --preset closed --set amp=bf16 batch_size=256

    # data parallel, 2 processes on the CPU (gloo) or one per GPU (NCCL)
    torchrun --standalone --nproc_per_node 2 -m workloads.resnet50.train --data D --seed 1 --preset smoke

Exit codes: 0 the run ended (converged or not: see run_stop's status), 2 bad arguments or data,
1 a crash.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

import torch
from mlperf_logging.mllog import constants as c
from torch import nn

from workloads.resnet50 import distributed
from workloads.resnet50.config import PRESETS, TrainConfig, with_overrides
from workloads.resnet50.data_loader import EvalTransform, ImageFolder, ShardSampler, TrainTransform, make_loader
from workloads.resnet50.engine import Precision, evaluate, sync_buffers, train_epoch
from workloads.resnet50.errors import LayoutError
from workloads.resnet50.layout import list_dataset
from workloads.resnet50.mlperf_log import MlperfLog, optimizer_keys
from workloads.resnet50.model import ModelConfig, ResNet50
from workloads.resnet50.optim import Schedule, build_optimizer

EXIT_BAD_INPUT = 2


def note(context: distributed.Context, message: str) -> None:
    """Progress for humans on stderr (stdout carries the MLLOG lines); rank 0 only."""
    if context.is_main:
        sys.stderr.write(f"resnet50: {message}\n")
        sys.stderr.flush()


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m workloads.resnet50.train", description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="dataset in the ImageNet folder layout")
    parser.add_argument("--results", type=Path, default=None, help="folder for the MLLOG file")
    parser.add_argument("--seed", type=int, required=True, help="seed of initialization, shuffling and augmentation")
    parser.add_argument("--preset", choices=sorted(PRESETS), default="closed", help="starting configuration")
    parser.add_argument("--target", type=float, default=None, help="top-1 target (default: the preset's 0.759)")
    parser.add_argument("--set", nargs="*", default=[], metavar="NAME=VALUE", help="override TrainConfig fields")
    return parser.parse_args(argv)


def schedule_for(config: TrainConfig, train_images: int, global_batch: int) -> Schedule:
    per_epoch = train_images / global_batch
    return Schedule(
        base_lr=config.base_lr,
        end_lr=config.end_lr,
        warmup_steps=round(config.warmup_epochs * per_epoch),
        decay_steps=max(1, round(config.decay_epochs * per_epoch)),
        power=config.poly_power,
    )


def block_length(config: TrainConfig, first_epoch: int) -> int:
    """Epochs from ``first_epoch`` up to and including the next evaluation (or the cap)."""
    epoch = first_epoch
    while epoch < config.max_epochs and not config.is_eval_epoch(epoch):
        epoch += 1
    return epoch - first_epoch + 1


def train(config: TrainConfig, *, data_dir: Path, results_dir: Path | None, seed: int,
          context: distributed.Context) -> str:
    """Run to the target or the epoch cap; returns the run_stop status."""
    log = MlperfLog(enabled=context.is_main, results_dir=results_dir)
    try:
        return _train(config, data_dir, seed, context, log)
    finally:
        log.close()


def _train(config: TrainConfig, data_dir: Path, seed: int, context: distributed.Context, log: MlperfLog) -> str:
    log.event(c.CACHE_CLEAR, True)
    log.start(c.INIT_START)
    for key, value in {
        c.SUBMISSION_BENCHMARK: c.RESNET,
        c.SUBMISSION_DIVISION: c.CLOSED,
        c.SUBMISSION_ORG: config.submission_org,
        c.SUBMISSION_PLATFORM: config.submission_platform,
        c.SUBMISSION_STATUS: config.submission_status,
    }.items():
        log.event(key, value)
    torch.set_num_threads(config.threads or max(1, (os.cpu_count() or 1) // context.world_size))
    torch.manual_seed(seed)

    train_split, val_split = list_dataset(data_dir)
    global_batch = config.batch_size * context.world_size
    schedule = schedule_for(config, len(train_split.samples), global_batch)
    log.event(c.SEED, seed)
    log.event(c.GLOBAL_BATCH_SIZE, global_batch)
    log.event(c.GRADIENT_ACCUMULATION_STEPS, 1)
    log.event(c.OPT_NAME, config.optimizer)
    log.event(c.MODEL_BN_SPAN, config.batch_size)
    for key, value in optimizer_keys(
        optimizer=config.optimizer, base_lr=config.base_lr, end_lr=config.end_lr, power=config.poly_power,
        decay_steps=schedule.decay_steps, warmup_epochs=config.warmup_epochs, momentum=config.momentum,
        weight_decay=config.weight_decay, lars_epsilon=config.lars_epsilon,
    ).items():
        log.event(key, value)

    model: nn.Module = ResNet50(ModelConfig(num_classes=len(train_split.classes), width=config.width,
                                            layers=config.layers)).to(context.device)
    if config.channels_last:
        model = model.to(memory_format=torch.channels_last)
    optimizer = build_optimizer(config.optimizer, model, lr=config.base_lr, momentum=config.momentum,
                                weight_decay=config.weight_decay, lars_eta=config.lars_eta,
                                lars_epsilon=config.lars_epsilon)
    network = distributed.wrap(model, context)
    if config.compile:
        network = torch.compile(network)
    criterion = nn.CrossEntropyLoss(label_smoothing=config.label_smoothing)
    scaler = torch.amp.GradScaler(context.device.type, enabled=config.amp == "fp16")
    precision = Precision(amp=config.amp, channels_last=config.channels_last)

    train_sampler = ShardSampler(len(train_split.samples), rank=context.rank, world=context.world_size, shuffle=True,
                                 seed=seed, batch_size=config.batch_size, drop_last=True)
    val_sampler = ShardSampler(len(val_split.samples), rank=context.rank, world=context.world_size, shuffle=False,
                               seed=seed, batch_size=config.eval_batch_size, drop_last=False)
    worker_seed = seed * 7919 + context.rank
    train_loader = make_loader(ImageFolder(train_split.samples, TrainTransform(crop=config.crop)), train_sampler,
                               batch_size=config.batch_size, workers=config.workers, seed=worker_seed)
    val_loader = make_loader(ImageFolder(val_split.samples, EvalTransform(resize=config.eval_resize, crop=config.crop)),
                             val_sampler, batch_size=config.eval_batch_size, workers=config.workers,
                             seed=worker_seed)
    log.end(c.INIT_STOP)
    distributed.barrier(context)

    log.start(c.RUN_START)
    log.event(c.TRAIN_SAMPLES, len(train_split.samples))
    log.event(c.EVAL_SAMPLES, len(val_split.samples))
    status, step, block_first, skipped = c.ABORTED, 0, 1, 0
    for epoch in range(1, config.max_epochs + 1):
        if epoch == block_first:
            log.start(c.BLOCK_START, metadata={c.FIRST_EPOCH_NUM: epoch, c.EPOCH_COUNT: block_length(config, epoch)})
        log.start(c.EPOCH_START, metadata={c.EPOCH_NUM: epoch})
        train_sampler.set_epoch(epoch)
        started = time.perf_counter()
        stats = train_epoch(network, train_loader, optimizer, criterion, schedule, step, precision, scaler, context)
        step += stats.steps
        skipped += stats.skipped
        log.end(c.EPOCH_STOP, metadata={c.EPOCH_NUM: epoch})
        seconds = time.perf_counter() - started
        rate = stats.images * context.world_size / seconds
        note(context, f"epoch {epoch}: loss {stats.mean_loss:.4f}, {rate:.1f} images/s")
        if stats.diverged:
            note(context, f"epoch {epoch}: loss is not finite, stopping (diverged)")
            log.end(c.BLOCK_STOP, metadata={c.FIRST_EPOCH_NUM: block_first})
            break
        last = epoch == config.max_epochs
        if not (config.is_eval_epoch(epoch) or last):
            continue
        log.end(c.BLOCK_STOP, metadata={c.FIRST_EPOCH_NUM: block_first})
        block_first = epoch + 1
        if not config.is_eval_epoch(epoch):
            break
        log.start(c.EVAL_START, metadata={c.EPOCH_NUM: epoch})
        sync_buffers(model, context)
        accuracy, eval_skipped = evaluate(model, val_loader, precision, context)
        skipped += eval_skipped
        log.event(c.EVAL_ACCURACY, accuracy, metadata={c.EPOCH_NUM: epoch})
        log.end(c.EVAL_STOP, metadata={c.EPOCH_NUM: epoch})
        note(context, f"epoch {epoch}: top-1 {accuracy:.4f} (target {config.target})")
        if accuracy >= config.target:
            status = c.SUCCESS
            break
    log.end(c.RUN_STOP, metadata={c.STATUS: status})
    if skipped:
        note(context, f"{skipped} unreadable images were skipped (each reported above); run `dataset verify`")
    return status


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        config = with_overrides(PRESETS[args.preset](), args.set)
        if args.target is not None:
            config = with_overrides(config, [f"target={args.target}"])
        if config.submission_platform == "unknown":
            config = with_overrides(config, [f"submission_platform={platform.node() or 'unknown'}"])
    except ValueError as exc:
        sys.stderr.write(f"resnet50: {exc}\n")
        return EXIT_BAD_INPUT
    context = distributed.init("cuda" if torch.cuda.is_available() else "cpu")
    try:
        train(config, data_dir=args.data, results_dir=args.results, seed=args.seed, context=context)
    except LayoutError as exc:
        sys.stderr.write(f"resnet50: bad dataset: {exc}\n")
        return EXIT_BAD_INPUT
    finally:
        distributed.shutdown(context)
    return 0


if __name__ == "__main__":
    sys.exit(main())
