"""Train ResNet-50 v1.5 to a top-1 target and log it the MLPerf way (``:::MLLOG`` lines).

Run it (from the project root):

    # one seed, as the orchestrator does (the seed is the only argument)
    DATADIR=/data/imagenet RESULTS_DIR=/tmp/r50 bash workloads/resnet50/run_and_time.sh 1

    # directly: the smoke preset on a synthetic dataset
    python -m workloads.resnet50.dataset synthesize /tmp/r50-data
    python -m workloads.resnet50.train --data /tmp/r50-data --results /tmp/r50 --seed 1 --preset smoke

    # any TrainConfig field can be overridden
    python -m workloads.resnet50.train --data D --seed 1 --preset closed --set precision=fp16 batch_size=256

    # a seed drawn by the workload itself (what the closed division asks for)
    python -m workloads.resnet50.train --data D --seed -1 --preset closed

    # keep the trained weights (a state_dict; what `workloads.inference` exports its smoke model from)
    python -m workloads.resnet50.train --data D --seed 1 --preset smoke --save-weights /tmp/r50.pt

    # data parallel, 2 processes on the CPU (gloo) or one per GPU (NCCL)
    torchrun --standalone --nproc_per_node 2 -m workloads.resnet50.train --data D --seed 1 --preset smoke

Environment: SUBMISSION_DIVISION=open forces the open division; MLTRAIN_SEEDS_RANDOM=1 says the
caller drew the seed at random (the closed division needs that, or --seed -1).

Exit codes: 0 the run ended (converged or not: see run_stop's status), 2 bad arguments or data,
1 a crash.
"""

from __future__ import annotations

import argparse
import os
import platform
import secrets
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import torch
from mlperf_logging.mllog import constants as c
from torch import nn

from workloads.common import distributed
from workloads.common.cli import Parser, run_main
from workloads.common.devices import pick_device
from workloads.common.errors import SettingsError
from workloads.common.mllog import RESOLVED_SETTINGS, MlperfLog
from workloads.resnet50.config import (
    PRESETS,
    TARGET_ENV,
    Environment,
    TrainConfig,
    build,
    env_assignments,
    preset_from,
)
from workloads.resnet50.division import decide
from workloads.resnet50.engine import build_network, evaluate, sync_buffers, train_epoch
from workloads.resnet50.layout import list_dataset
from workloads.resnet50.memory import fits_or_raise
from workloads.resnet50.mlperf_log import LOG_FILE, optimizer_keys
from workloads.resnet50.optim import Schedule
from workloads.resnet50.pipeline import build_pipelines
from workloads.resnet50.runtime import resolve_setup

RANDOM_SEED = -1
"""--seed value that makes the workload draw the seed itself."""


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = Parser(prog="python -m workloads.resnet50.train", description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="dataset in the ImageNet folder layout")
    parser.add_argument("--results", type=Path, default=None, help="folder for the MLLOG file")
    parser.add_argument("--seed", type=int, required=True,
                        help="seed of initialization, shuffling and augmentation (-1: drawn at random)")
    parser.add_argument("--preset", choices=sorted(PRESETS), default=None,
                        help="starting configuration (default: $RESNET50_PRESET, smoke under MLTRAIN_PROFILE=smoke, "
                             "else closed)")
    parser.add_argument("--target", type=float, default=None,
                        help="top-1 target (default: $QUALITY_THRESHOLD, else the preset's 0.759)")
    parser.add_argument("--set", nargs="*", default=[], metavar="NAME=VALUE",
                        help="override TrainConfig fields (after $RESNET50_SET, $RESNET50_PLATFORM and $THREADS)")
    parser.add_argument("--save-weights", type=Path, default=None, metavar="FILE",
                        help="write the trained model's state_dict here after run_stop (rank 0)")
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
          context: distributed.Context, environment: Environment | None = None,
          save_weights: Path | None = None) -> str:
    """Run to the target or the epoch cap; returns the run_stop status. ``save_weights``: where rank 0
    writes the trained model's state_dict after run_stop (outside the timed region)."""
    with MlperfLog(results_dir / LOG_FILE if results_dir else None, enabled=context.is_main) as log:
        return _train(config, data_dir, seed, context, log, environment or Environment(), save_weights)


def _train(config: TrainConfig, data_dir: Path, seed: int, context: distributed.Context, log: MlperfLog,
           environment: Environment, save_weights: Path | None) -> str:
    log.event(c.CACHE_CLEAR, True)
    log.start(c.INIT_START)
    for key, value in {
        c.SUBMISSION_BENCHMARK: c.RESNET,
        c.SUBMISSION_ORG: config.submission_org,
        c.SUBMISSION_PLATFORM: config.submission_platform,
        c.SUBMISSION_STATUS: config.submission_status,
    }.items():
        log.event(key, value)
    setup = resolve_setup(config, context)
    fits_or_raise(config, setup.precision.dtype, total_memory=setup.device_memory,
                  device_name=setup.settings["device_name"], processes=context.world_size)
    log.event(RESOLVED_SETTINGS, setup.settings)
    seed_random = environment.seeds_random
    if seed == RANDOM_SEED:
        seed, seed_random = distributed.broadcast_int(secrets.randbelow(2**31), context), True
    torch.manual_seed(seed)

    train_split, val_split = list_dataset(data_dir)  # file names only: no image is opened before run_start
    global_batch = config.batch_size * context.world_size
    division = decide(config, global_batch=global_batch, train_images=len(train_split.samples),
                      classes=len(train_split.classes), seed_random=seed_random, force_open=environment.force_open)
    log.event(c.SUBMISSION_DIVISION, division.label, metadata={"reason": division.reason} if division.reason else None)
    if division.reason:
        context.note("resnet50", f"division open: {division.reason}")
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

    built = build_network(config, len(train_split.classes), context)
    model, network, optimizer = built.model, built.network, built.optimizer
    criterion = nn.CrossEntropyLoss(label_smoothing=config.label_smoothing)
    precision = setup.precision
    scaler = precision.scaler(context.device)
    train_batches, val_batches = build_pipelines(config, setup.decode, train_split, val_split, context, seed)
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
        train_batches.set_epoch(epoch)
        started = time.perf_counter()
        stats = train_epoch(network, train_batches, optimizer, criterion, schedule, step, precision, scaler, context,
                            finite_check_steps=config.finite_check_steps)
        step += stats.steps
        skipped += stats.skipped
        log.end(c.EPOCH_STOP, metadata={c.EPOCH_NUM: epoch})
        seconds = time.perf_counter() - started
        rate = stats.images * context.world_size / seconds
        context.note("resnet50", f"epoch {epoch}: loss {stats.mean_loss:.4f}, {rate:.1f} images/s")
        if stats.diverged:
            context.note("resnet50", f"epoch {epoch}: loss is not finite, stopping (diverged)")
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
        accuracy, eval_skipped = evaluate(model, val_batches, precision, context)
        skipped += eval_skipped
        log.event(c.EVAL_ACCURACY, accuracy, metadata={c.EPOCH_NUM: epoch})
        log.end(c.EVAL_STOP, metadata={c.EPOCH_NUM: epoch})
        context.note("resnet50", f"epoch {epoch}: top-1 {accuracy:.4f} (target {config.target})")
        if accuracy >= config.target:
            status = c.SUCCESS
            break
    log.end(c.RUN_STOP, metadata={c.STATUS: status})
    if save_weights is not None and context.is_main:
        torch.save(model.state_dict(), save_weights)
    if skipped:
        context.note("resnet50",
                     f"{skipped} unreadable images were skipped (each reported above); run `dataset verify`")
    return status


def config_from_args(args: argparse.Namespace, processes: int, env: Mapping[str, str]) -> TrainConfig:
    """The preset and assignments of the environment (config.py's knobs), then the command line's."""
    preset = args.preset or preset_from(env)
    assignments = [*env_assignments(env), *args.set]
    target = args.target if args.target is not None else env.get(TARGET_ENV)
    if target:
        assignments.append(f"target={target}")
    config = build(preset, processes, assignments)
    if config.submission_platform == "unknown":
        config = build(preset, processes, [*assignments, f"submission_platform={platform.node() or 'unknown'}"])
    return config


def _main(argv: list[str] | None) -> None:
    args = parse_args(argv)
    if args.seed < RANDOM_SEED:
        raise SettingsError(f"--seed must be a non-negative integer or -1 (drawn at random), got {args.seed}")
    environment = Environment.read(os.environ)
    config = config_from_args(args, distributed.env_world_size(), os.environ)
    with distributed.joined(pick_device(config.device)) as context:
        train(config, data_dir=args.data, results_dir=args.results, seed=args.seed, context=context,
              environment=environment, save_weights=args.save_weights)


def main(argv: list[str] | None = None) -> int:
    return run_main(lambda: _main(argv), prefix="resnet50")


if __name__ == "__main__":
    sys.exit(main())
