"""Train the MLPerf unet3d benchmark (3D U-Net on KiTS19) until the Dice target, logging MLLOG.

Run commands (from the project root):

    # one process, reference defaults (closed model, patch 128^3, batch 2)
    python -m workloads.unet3d.train --data-dir /data --results-dir /results --seed 1

    # data parallel on one node (gloo on CPU, nccl on GPUs), global batch = 2 x batch size
    torchrun --standalone --nproc_per_node 2 -m workloads.unet3d.train --data-dir /data --results-dir /results

    # the benchmark's entry point: all knobs from the environment (see run_and_time.sh)
    DATADIR=/data RESULTS_DIR=/results bash workloads/unet3d/run_and_time.sh 1

Exit codes: 0 the run ended (converged or not: see run_stop), 2 bad arguments or data, 1 crash.
"""

from __future__ import annotations

import contextlib
import os
import random
import sys
from collections.abc import Callable, Sequence

import numpy as np
import torch
from mlperf_logging.mllog import constants as C

from workloads.unet3d import mlperf_log as K
from workloads.unet3d.augment import BalancedCrop
from workloads.unet3d.config import Schedule, TrainConfig, config_from_args, learning_rate, resolve_schedule
from workloads.unet3d.data_loader import (
    LoaderSettings,
    ShardedShuffleSampler,
    TrainDataset,
    eval_cases_of_rank,
    load_case,
    train_loader,
)
from workloads.unet3d.distributed import Context, all_reduce_sum, broadcast_int, init, shutdown, wrap
from workloads.unet3d.errors import EXIT_BAD_DATA, DataError
from workloads.unet3d.evaluate import evaluate_case
from workloads.unet3d.losses import DiceCELoss
from workloads.unet3d.mlperf_log import MlperfLog
from workloads.unet3d.model import UNet3D
from workloads.unet3d.split import load_split

DIVERGENCE_DICE = 1e-6


def master_seed(config: TrainConfig, ctx: Context) -> int:
    """The configured seed, or one drawn from the OS by rank 0 (-1); the same on every rank."""
    seed = config.seed if config.seed != -1 else random.SystemRandom().randint(0, 2**32 - 1)
    return broadcast_int(seed, ctx)


def worker_seed(seed: int, rank: int, world_size: int) -> int:
    """Rank ``rank``'s seed, drawn from the master seed like the reference's ``setup_seeds``."""
    rng = random.Random(seed)
    return [rng.randint(0, 2**32 - 1) for _ in range(world_size)][rank]


def autocast(config: TrainConfig, device: torch.device) -> contextlib.AbstractContextManager:
    if config.amp is None:
        return contextlib.nullcontext()
    dtype = torch.bfloat16 if config.amp == "bf16" else torch.float16
    return torch.autocast(device_type=device.type, dtype=dtype)


def log_preamble(log: MlperfLog, config: TrainConfig, seed: int) -> None:
    """seed, submission_* and hyperparameters, in the reference's order."""
    log.event(C.SEED, seed)
    log.event(C.SUBMISSION_BENCHMARK, C.UNET3D)
    log.event(C.SUBMISSION_ORG, config.submission_org)
    log.event(C.SUBMISSION_DIVISION, config.division)
    log.event(C.SUBMISSION_STATUS, config.submission_status)
    log.event(C.SUBMISSION_PLATFORM, config.submission_platform)
    log.event(C.OPT_NAME, C.SGD)
    log.event(C.OPT_BASE_LR, config.learning_rate)
    log.event(C.OPT_LR_WARMUP_EPOCHS, config.lr_warmup_epochs)
    log.event(C.OPT_LR_DECAY_BOUNDARY_EPOCHS, list(config.lr_decay_epochs))
    log.event(C.OPT_LR_DECAY_FACTOR, config.lr_decay_factor)
    log.event(C.OPT_WEIGHT_DECAY, config.weight_decay)
    log.event(K.OPT_MOMENTUM, config.momentum)
    log.event(K.OVERSAMPLING, config.oversampling)
    log.event(K.TRAINING_INPUT_SHAPE, list(config.input_shape))
    log.event(K.VALIDATION_INPUT_SHAPE, list(config.val_input_shape))
    log.event(K.VALIDATION_OVERLAP, config.overlap)


def check_cases(config: TrainConfig, cases: Sequence[str], patch: tuple[int, int, int]) -> None:
    """Every case loads (headers only) and is at least one patch large; DataError otherwise."""
    for case in cases:
        image, _ = load_case(config.data_dir, case, mmap=True)
        if any(s < p for s, p in zip(image.shape[1:], patch, strict=True)):
            raise DataError(f"{config.data_dir}: {case}: shape {image.shape[1:]} is smaller than the patch {patch}")


def evaluate(
    model: Callable[[torch.Tensor], torch.Tensor],
    config: TrainConfig,
    cases: Sequence[str],
    ctx: Context,
    device: torch.device,
) -> tuple[float, float]:
    """(kidney Dice, tumour Dice) averaged over all evaluation cases; each rank scores its share."""
    total = torch.zeros(3, dtype=torch.float64)  # kidney sum, tumour sum, case count
    with torch.no_grad(), autocast(config, device):
        for case in eval_cases_of_rank(cases, ctx.rank, ctx.world_size):
            image, label = load_case(config.data_dir, case)
            dice = evaluate_case(model, image, label, config.val_input_shape, config.overlap)
            total += torch.tensor([float(dice[0]), float(dice[1]), 1.0], dtype=torch.float64)
    total = all_reduce_sum(total, ctx)
    return float(total[0] / total[2]), float(total[1] / total[2])


def train_epoch(
    model: torch.nn.Module,
    loader: torch.utils.data.DataLoader,
    optimizer: torch.optim.Optimizer,
    scaler: torch.amp.GradScaler,
    loss_fn: DiceCELoss,
    config: TrainConfig,
    device: torch.device,
) -> None:
    memory_format = torch.channels_last_3d if config.channels_last else torch.contiguous_format
    optimizer.zero_grad(set_to_none=True)
    for step, (image, label) in enumerate(loader):
        image = image.to(device, memory_format=memory_format)  # (B, 1, D, H, W)
        label = label.to(device)  # (B, 1, D, H, W) uint8
        with autocast(config, device):
            loss = loss_fn(model(image), label) / config.ga_steps
        scaler.scale(loss).backward()
        if (step + 1) % config.ga_steps == 0:
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad(set_to_none=True)


def train(config: TrainConfig, log: MlperfLog, ctx: Context, device: torch.device) -> str:
    """Everything after init_start up to run_stop; returns the run_stop status."""
    seed = master_seed(config, ctx)
    torch.manual_seed(worker_seed(seed, ctx.rank, ctx.world_size))
    log_preamble(log, config, seed)

    base = UNet3D(config.model).to(device)
    if config.channels_last:
        base = base.to(memory_format=torch.channels_last_3d)
    log.event(C.WEIGHTS_INITIALIZATION)
    net: torch.nn.Module = torch.compile(base) if config.compile else base
    model = wrap(net, ctx)
    optimizer = torch.optim.SGD(
        model.parameters(),
        lr=learning_rate(config, 1),
        momentum=config.momentum,
        nesterov=True,
        weight_decay=config.weight_decay,
    )
    scaler = torch.amp.GradScaler(device.type, enabled=config.amp == "fp16")
    loss_fn = DiceCELoss()
    train_ids, eval_ids = load_split(config.data_dir)
    if not eval_ids:
        raise DataError(f"{config.data_dir}: no evaluation cases in the split")
    check_cases(config, train_ids, config.input_shape)
    check_cases(config, eval_ids, (1, 1, 1))
    try:
        schedule = resolve_schedule(config, len(train_ids), ctx.world_size)
    except ValueError as err:
        raise DataError(f"{config.data_dir}: {err}") from None
    log.end(C.INIT_STOP)

    log.start(C.RUN_START)
    dataset = TrainDataset(config.data_dir, train_ids, BalancedCrop(patch=config.input_shape,
                                                                    oversampling=config.oversampling))
    sampler = ShardedShuffleSampler(
        len(train_ids), config.batch_size * ctx.world_size, ctx.rank, ctx.world_size, seed
    )
    loader = train_loader(dataset, sampler, LoaderSettings(batch_size=config.batch_size,
                                                           num_workers=config.num_workers))
    log.event(C.TRAIN_SAMPLES, len(train_ids))
    log.event(C.EVAL_SAMPLES, len(eval_ids))
    log.event(K.SAMPLES_PER_EPOCH, schedule.samples_per_epoch)
    log.event(C.GLOBAL_BATCH_SIZE, config.batch_size * ctx.world_size * config.ga_steps)
    log.event(C.GRADIENT_ACCUMULATION_STEPS, config.ga_steps)
    return run_epochs(model, net, loader, sampler, optimizer, scaler, loss_fn, config, schedule, eval_ids,
                      log, ctx, device)


def run_epochs(
    model: torch.nn.Module,
    eval_model: torch.nn.Module,
    loader: torch.utils.data.DataLoader,
    sampler: ShardedShuffleSampler,
    optimizer: torch.optim.Optimizer,
    scaler: torch.amp.GradScaler,
    loss_fn: DiceCELoss,
    config: TrainConfig,
    schedule: Schedule,
    eval_ids: Sequence[str],
    log: MlperfLog,
    ctx: Context,
    device: torch.device,
) -> str:
    """Train epoch by epoch, evaluate on schedule; success at the target, aborted on divergence or the cap."""
    memory_format = torch.channels_last_3d if config.channels_last else torch.contiguous_format

    def infer(x: torch.Tensor) -> torch.Tensor:
        return eval_model(x.to(device, memory_format=memory_format))

    status = C.ABORTED
    for epoch in range(1, schedule.max_epochs + 1):
        for group_params in optimizer.param_groups:
            group_params["lr"] = learning_rate(config, epoch)
        block = {C.FIRST_EPOCH_NUM: epoch, C.EPOCH_COUNT: 1}
        log.start(C.BLOCK_START, metadata=block)
        log.start(C.EPOCH_START, metadata={C.EPOCH_NUM: epoch})
        sampler.set_epoch(epoch)
        model.train()
        train_epoch(model, loader, optimizer, scaler, loss_fn, config, device)
        log.end(C.EPOCH_STOP, metadata={C.EPOCH_NUM: epoch})
        stop = False
        if schedule.is_eval_epoch(epoch):
            log.start(C.EVAL_START, value=epoch, metadata={C.EPOCH_NUM: epoch})
            model.eval()
            kidney, tumour = evaluate(infer, config, eval_ids, ctx, device)
            accuracy = (kidney + tumour) / 2
            log.event(C.EVAL_ACCURACY, value=accuracy,
                      metadata={C.EPOCH_NUM: epoch, "kidney_dice": kidney, "tumour_dice": tumour})
            log.end(C.EVAL_STOP, metadata={C.EPOCH_NUM: epoch})
            if accuracy >= config.quality_threshold:
                status, stop = C.SUCCESS, True
            elif accuracy < DIVERGENCE_DICE or not np.isfinite(accuracy):
                stop = True  # diverged: aborted
        log.end(C.BLOCK_STOP, metadata=block)
        if stop:
            break
    return status


def run(config: TrainConfig) -> int:
    """One run: MLLOG from cache_clear to run_stop; returns the process exit code."""
    rank = int(os.environ.get("RANK", "0"))
    if rank == 0:
        config.results_dir.mkdir(parents=True, exist_ok=True)
    log = MlperfLog(config.log_path if rank == 0 else None, enabled=rank == 0)
    ctx = Context()
    try:
        log.event(C.CACHE_CLEAR, value=True)
        log.start(C.INIT_START)
        if config.threads:
            torch.set_num_threads(config.threads)
        ctx = init("cuda" if torch.cuda.is_available() else "cpu")
        status = train(config, log, ctx, ctx.device)
        log.end(C.RUN_STOP, metadata={C.STATUS: status})
        return 0
    finally:
        log.close()
        shutdown(ctx)


def fail(message: str) -> None:
    """The CLI's one way to talk to the user: one line on stderr."""
    sys.stderr.write(f"unet3d train: {message}\n")


def main(argv: Sequence[str] | None = None) -> int:
    try:
        config = config_from_args(sys.argv[1:] if argv is None else argv, os.environ)
    except ValueError as err:
        fail(str(err))
        return EXIT_BAD_DATA
    try:
        return run(config)
    except DataError as err:
        fail(str(err))
        return EXIT_BAD_DATA


if __name__ == "__main__":
    sys.exit(main())
