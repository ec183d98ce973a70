"""Train the MLPerf unet3d benchmark (3D U-Net on KiTS19) until the Dice target, logging MLLOG.

Run commands (from the project root):

    # one process, reference defaults (closed model, patch 128^3, batch 2), precision and threads auto
    python -m workloads.unet3d.train --data-dir /data --results-dir /results --seed 1

    # data parallel on one node (gloo on CPU, nccl on GPUs), global batch = 2 x batch size
    torchrun --standalone --nproc_per_node 2 -m workloads.unet3d.train --data-dir /data --results-dir /results

    # the benchmark's entry point: all knobs from the environment (see run_and_time.sh)
    DATADIR=/data RESULTS_DIR=/results bash workloads/unet3d/run_and_time.sh 1

Before run_start nothing opens a dataset file: the folder is listed (names only) to decide the
division; the split, the shapes and every case are read after run_start.

Exit codes: 0 the run ended (converged or not: see run_stop), 2 bad arguments, settings or data, 1 crash.
"""

from __future__ import annotations

import os
import random
import sys
from collections.abc import Sequence

import numpy as np
import torch
from mlperf_logging.mllog import constants as C

from workloads.common.cli import run_main
from workloads.common.devices import pick_device
from workloads.common.distributed import Context, all_reduce_sum, barrier, broadcast_int, env_rank, joined
from workloads.common.errors import DataError, SettingsError
from workloads.common.mllog import CUTS, RESOLVED_SETTINGS, MlperfLog
from workloads.unet3d import mlperf_log as K
from workloads.unet3d.augment import BalancedCrop
from workloads.unet3d.config import Schedule, TrainConfig, learning_rate, resolve_schedule
from workloads.unet3d.data_loader import (
    EvalDataset,
    LoaderSettings,
    ShardedShuffleSampler,
    TrainDataset,
    check_shapes,
    eval_cases_of_rank,
    eval_loader,
    train_loader,
)
from workloads.unet3d.division import division
from workloads.unet3d.evaluate import evaluate_case
from workloads.unet3d.export import save
from workloads.unet3d.knobs import config_from_args
from workloads.unet3d.precision import autocast
from workloads.unet3d.settings import RunSettings, resolve_settings
from workloads.unet3d.split import Listing, list_dataset, load_split
from workloads.unet3d.step import Trainer, build_trainer, to_device, train_step, warm_up

DIVERGENCE_DICE = 1e-6


def master_seed(config: TrainConfig, ctx: Context) -> int:
    """The configured seed, or one drawn from the OS by rank 0 (-1); the same on every rank."""
    seed = config.seed if config.seed != -1 else random.SystemRandom().randint(0, 2**32 - 1)
    return broadcast_int(seed, ctx)


def worker_seed(seed: int, rank: int, world_size: int) -> int:
    """Rank ``rank``'s seed, drawn from the master seed like the reference's ``setup_seeds``."""
    rng = random.Random(seed)
    return [rng.randint(0, 2**32 - 1) for _ in range(world_size)][rank]


def platform(config: TrainConfig, settings: RunSettings, ctx: Context) -> str:
    """submission_platform: $SUBMISSION_PLATFORM, else the device's name (``2xNVIDIA H100 ...`` for 2 GPUs)."""
    if config.submission_platform:
        return config.submission_platform
    return f"{ctx.world_size}x{settings.device_name}" if ctx.world_size > 1 else settings.device_name


def log_preamble(log: MlperfLog, config: TrainConfig, seed: int, platform_name: str, listing: Listing,
                 world_size: int) -> None:
    """seed, submission_* and hyperparameters, in the reference's order."""
    label, reason = division(config, listing, world_size)
    log.event(C.SEED, seed)
    log.event(C.SUBMISSION_BENCHMARK, C.UNET3D)
    log.event(C.SUBMISSION_ORG, config.submission_org)
    log.event(C.SUBMISSION_DIVISION, label, metadata={"reason": reason} if reason else None)
    log.event(C.SUBMISSION_STATUS, config.submission_status)
    log.event(C.SUBMISSION_PLATFORM, platform_name)
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


def evaluate(trainer: Trainer, loader: torch.utils.data.DataLoader, config: TrainConfig, ctx: Context
             ) -> tuple[float, float]:
    """(kidney Dice, tumour Dice) averaged over all evaluation cases; each rank scores its share on its
    device, and the sums meet in one all-reduce (the one host synchronisation of an evaluation)."""
    settings = trainer.settings
    total = torch.zeros(3, dtype=torch.float64, device=ctx.device)  # kidney sum, tumour sum, case count
    trainer.eval_model.eval()
    with torch.inference_mode(), autocast(settings.precision, ctx.device):
        for image, label in loader:  # (1, D, H, W) each, this rank's cases
            dice = evaluate_case(trainer.eval_model, image, label, config.val_input_shape, config.overlap,
                                 device=ctx.device, batch=settings.eval_batch, memory_format=settings.memory_format,
                                 fixed_batch=settings.compile)
            total[:2] += dice.double()
            total[2] += 1
    kidney, tumour, count = all_reduce_sum(total, ctx).tolist()
    return kidney / count, tumour / count


def train_epoch(trainer: Trainer, loader: torch.utils.data.DataLoader) -> None:
    """One pass over this rank's batches; no host synchronisation inside."""
    trainer.model.train()
    for step, batch in enumerate(loader):
        image, label = to_device(batch, trainer.settings)
        train_step(trainer, image, label, update=(step + 1) % trainer.ga_steps == 0)


def train(config: TrainConfig, settings: RunSettings, log: MlperfLog, ctx: Context) -> tuple[str, Trainer]:
    """Everything after init_start up to run_stop; returns the run_stop status and the trainer."""
    seed = master_seed(config, ctx)
    torch.manual_seed(worker_seed(seed, ctx.rank, ctx.world_size))
    listing = list_dataset(config.data_dir)  # names only: nothing is opened before run_start
    log_preamble(log, config, seed, platform(config, settings, ctx), listing, ctx.world_size)
    trainer = build_trainer(config, settings, ctx)
    log.event(C.WEIGHTS_INITIALIZATION)
    warm_up(trainer, config)
    barrier(ctx)
    log.end(C.INIT_STOP)

    log.start(C.RUN_START)
    train_ids, eval_ids = load_split(config.data_dir, listing)
    if not eval_ids:
        raise DataError(f"{config.data_dir}: no evaluation cases in the split")
    if config.cuts.any:  # a smoke run on real data: what it leaves out is logged, never silent
        log.event(CUTS, config.cuts.log_value(train_ids, eval_ids))
        train_ids, eval_ids = config.cuts.select(train_ids, eval_ids)
    check_shapes(config.data_dir, train_ids, config.input_shape)
    check_shapes(config.data_dir, eval_ids, (1, 1, 1))
    try:
        schedule = resolve_schedule(config, len(train_ids), ctx.world_size)
    except ValueError as err:
        raise DataError(f"{config.data_dir}: {err}") from None
    loader_settings = LoaderSettings(batch_size=config.batch_size, num_workers=settings.num_workers,
                                     pin_memory=settings.pin_memory)
    crop = BalancedCrop(patch=config.input_shape, oversampling=config.oversampling)
    sampler = ShardedShuffleSampler(len(train_ids), config.batch_size * ctx.world_size, ctx.rank, ctx.world_size, seed)
    loader = train_loader(TrainDataset(config.data_dir, train_ids, crop), sampler, loader_settings)
    evaluation = eval_loader(EvalDataset(config.data_dir, eval_cases_of_rank(eval_ids, ctx.rank, ctx.world_size),
                                         config.cuts.eval_crop), loader_settings)
    log.event(C.TRAIN_SAMPLES, len(train_ids))
    log.event(C.EVAL_SAMPLES, len(eval_ids))
    log.event(K.SAMPLES_PER_EPOCH, schedule.samples_per_epoch)
    log.event(C.GLOBAL_BATCH_SIZE, config.batch_size * ctx.world_size * config.ga_steps)
    log.event(C.GRADIENT_ACCUMULATION_STEPS, config.ga_steps)
    return run_epochs(trainer, loader, sampler, evaluation, config, schedule, log, ctx), trainer


def run_epochs(
    trainer: Trainer,
    loader: torch.utils.data.DataLoader,
    sampler: ShardedShuffleSampler,
    evaluation: torch.utils.data.DataLoader,
    config: TrainConfig,
    schedule: Schedule,
    log: MlperfLog,
    ctx: Context,
) -> str:
    """Train epoch by epoch, evaluate on schedule; success at the target, aborted on divergence or the cap.
    Epoch numbers are logged in samples (epoch x samples per epoch, `Schedule.samples`)."""
    status = C.ABORTED
    for epoch in range(1, schedule.max_epochs + 1):
        for group_params in trainer.optimizer.param_groups:
            group_params["lr"] = learning_rate(config, epoch)
        samples = schedule.samples(epoch)  # epoch numbers count samples, as the v4.0 RCPs do
        block = {C.FIRST_EPOCH_NUM: samples, C.EPOCH_COUNT: schedule.samples_per_epoch}
        log.start(C.BLOCK_START, metadata=block)
        log.start(C.EPOCH_START, metadata={C.EPOCH_NUM: samples})
        sampler.set_epoch(epoch)
        train_epoch(trainer, loader)
        log.end(C.EPOCH_STOP, metadata={C.EPOCH_NUM: samples})
        stop = False
        if schedule.is_eval_epoch(epoch):
            log.start(C.EVAL_START, value=samples, metadata={C.EPOCH_NUM: samples})
            kidney, tumour = evaluate(trainer, evaluation, config, ctx)
            accuracy = (kidney + tumour) / 2
            log.event(C.EVAL_ACCURACY, value=accuracy,
                      metadata={C.EPOCH_NUM: samples, "kidney_dice": kidney, "tumour_dice": tumour})
            log.end(C.EVAL_STOP, metadata={C.EPOCH_NUM: samples})
            if accuracy >= config.quality_threshold:
                status, stop = C.SUCCESS, True
            elif accuracy < DIVERGENCE_DICE or not np.isfinite(accuracy):
                stop = True  # diverged: aborted
        log.end(C.BLOCK_STOP, metadata=block)
        if stop:
            break
    barrier(ctx)
    return status


def run(config: TrainConfig) -> int:
    """One run: MLLOG from cache_clear to run_stop; returns the process exit code."""
    with MlperfLog(config.log_path, enabled=env_rank() == 0) as log:
        log.event(C.CACHE_CLEAR, value=True)
        log.start(C.INIT_START)
        with joined(pick_device("auto")) as ctx:
            run_joined(config, log, ctx)
    return 0


def run_joined(config: TrainConfig, log: MlperfLog, ctx: Context) -> None:
    """The run inside the group: the trainer (and its DDP model) is gone when this returns, before
    the group is left (a DDP model alive past ``destroy_process_group`` keeps gloo's threads until
    the interpreter's exit, where they abort the process)."""
    settings = resolve_settings(
        device=ctx.device, requested_precision=config.precision, threads=config.threads,
        nproc=ctx.local_world_size, channels_last=config.channels_last,
        compile_model=config.compile, num_workers=config.num_workers, eval_batch=config.eval_batch,
        knobs=config.step,
    )
    torch.set_num_threads(settings.threads)
    log.event(RESOLVED_SETTINGS, settings.log_value())
    status, trainer = train(config, settings, log, ctx)
    log.end(C.RUN_STOP, metadata={C.STATUS: status})
    if config.save_model and ctx.rank == 0:  # after run_stop: outside the timed run
        save(trainer.base, config.model, config.val_input_shape, config.results_dir,
             {"status": status, "overlap": config.overlap, "precision": settings.precision})


def _main(argv: Sequence[str] | None) -> int:
    try:
        config = config_from_args(sys.argv[1:] if argv is None else argv, os.environ)
    except ValueError as err:  # TrainConfig's checks of the values given
        raise SettingsError(str(err)) from None
    return run(config)


def main(argv: Sequence[str] | None = None) -> int:
    return run_main(lambda: _main(argv), prefix="unet3d train")


if __name__ == "__main__":
    sys.exit(main())
