"""Train Llama 3.1 8B (or a scaled-down shape) to a validation log perplexity and log it the MLPerf
way (``:::MLLOG`` lines).

    # one seed, as the orchestrator does
    DATADIR=/data/c4 RESULTS_DIR=/tmp/l8 bash workloads/llama31_8b/run_and_time.sh 1

    # the smoke preset on synthetic token data
    python -m workloads.llama31_8b.dataset synthesize /tmp/l8-data
    python -m workloads.llama31_8b.train --data /tmp/l8-data --results /tmp/l8 --seed 1 --preset smoke

    # any TrainConfig field can be overridden; FSDP2 over 2 CPU processes (gloo) or one per GPU (NCCL)
    torchrun --standalone --nproc_per_node 2 -m workloads.llama31_8b.train --data D --seed 1 --set layers=4

Environment: config.py's knobs; SUBMISSION_DIVISION=open forces the open division;
MLTRAIN_SEEDS_RANDOM=1 says the caller drew the seed at random. Exit codes: 0 the run ended
(converged or not: see run_stop's status), 2 bad arguments or data, 1 a crash.
"""

from __future__ import annotations

import argparse
import os
import platform
import secrets
import sys
import time
from pathlib import Path

import torch
from mlperf_logging.mllog import constants as c

from workloads.common import distributed
from workloads.common.cli import Parser, run_main
from workloads.common.devices import pick_device
from workloads.common.errors import SettingsError
from workloads.common.mllog import RESOLVED_SETTINGS, MlperfLog
from workloads.llama31_8b import engine, sequences
from workloads.llama31_8b.config import PRESETS, Environment, TrainConfig, build, env_assignments, preset_from
from workloads.llama31_8b.dataset import SYNTHETIC_FACTS
from workloads.llama31_8b.division import decide
from workloads.llama31_8b.mlperf_log import LOG_FILE, hyperparameters
from workloads.llama31_8b.runtime import resolve_setup

RANDOM_SEED = -1


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = Parser(prog="python -m workloads.llama31_8b.train", description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="folder of the C4 .bin/.idx pairs")
    parser.add_argument("--results", type=Path, default=None, help="folder for the MLLOG file")
    parser.add_argument("--seed", type=int, required=True, help="seed of initialisation and data order (-1: drawn)")
    parser.add_argument("--preset", choices=sorted(PRESETS), default=None,
                        help="starting configuration (default: $LLAMA31_8B_PRESET, smoke under MLTRAIN_PROFILE=smoke, "
                             "else closed)")
    parser.add_argument("--set", nargs="*", default=[], metavar="NAME=VALUE",
                        help="override TrainConfig fields (after the environment's)")
    return parser.parse_args(argv)


def train(config: TrainConfig, *, data_dir: Path, results_dir: Path | None, seed: int,
          context: distributed.Context, environment: Environment | None = None) -> str:
    """Run to the target, the step cap or max_steps; returns the run_stop status."""
    with MlperfLog(results_dir / LOG_FILE if results_dir else None, enabled=context.is_main) as log:
        return _train(config, data_dir, seed, context, log, environment or Environment())


def _train(config: TrainConfig, data_dir: Path, seed: int, context: distributed.Context, log: MlperfLog,
           environment: Environment) -> str:
    log.event(c.CACHE_CLEAR, True)
    log.start(c.INIT_START)
    for key, value in {c.SUBMISSION_BENCHMARK: c.LLAMA31_8B, c.SUBMISSION_ORG: config.submission_org,
                       c.SUBMISSION_PLATFORM: config.submission_platform,
                       c.SUBMISSION_STATUS: config.submission_status}.items():
        log.event(key, value)
    setup = resolve_setup(config, context)
    log.event(RESOLVED_SETTINGS, setup.settings)
    share = config.global_batch // context.world_size
    config.accumulation(context.world_size)  # refuses a global batch that does not split
    seed_random = environment.seeds_random
    if seed == RANDOM_SEED:
        seed, seed_random = distributed.broadcast_int(secrets.randbelow(2**31), context), True
    torch.manual_seed(seed)
    division = decide(config, synthetic_data=(data_dir / SYNTHETIC_FACTS).is_file(), seed_random=seed_random,
                      force_open=environment.force_open)
    log.event(c.SUBMISSION_DIVISION, division.label, metadata={"reason": division.reason} if division.reason else None)
    if division.reason:
        context.note("llama31_8b", f"division open: {division.reason}")
    log.event(c.SEED, seed)
    for key, value in hyperparameters(config, processes=context.world_size, precision=setup.precision).items():
        log.event(key, value)

    train_shards = sequences.open_train(data_dir, config.shards)  # memory-mapped: nothing read before run_start
    stream = sequences.TrainStream(train_shards, config.seq_len, seed)
    validation = sequences.validation_batches(data_dir, config.seq_len, config.eval_samples)
    model, optimizer = engine.build(config, context)
    scaler = engine.scaler_for(setup.precision, context)
    schedule = engine.schedule_of(config)
    log.end(c.INIT_STOP)
    distributed.barrier(context)

    log.start(c.RUN_START)
    log.event(c.TRAIN_SAMPLES, stream.per_epoch)
    status, step, started = c.ABORTED, 0, time.perf_counter()
    last_step = min(config.max_steps, config.stop_after_steps or config.max_steps)
    log.start(c.BLOCK_START, metadata={c.SAMPLES_COUNT: 0})
    while step < last_step:
        rows = torch.from_numpy(stream.batch(step, config.global_batch, context.rank, share))
        batch = rows.to(context.device, non_blocking=True)
        result = engine.train_step(model, optimizer, batch, lr=schedule.lr(step), config=config,
                                   precision=setup.precision, scaler=scaler)
        step += 1
        consumed = step * config.global_batch
        if not (config.is_eval_step(step) or step == last_step):
            continue
        loss = float(distributed.all_reduce_sum(result.loss, context)) / context.world_size
        log.end(c.BLOCK_STOP, metadata={c.SAMPLES_COUNT: consumed})
        if not torch.isfinite(torch.tensor(loss)):
            context.note("llama31_8b", f"step {step}: training loss is not finite, stopping (diverged)")
            break
        log.start(c.EVAL_START, metadata={c.SAMPLES_COUNT: consumed})
        value = engine.evaluate(model, validation, config=config, precision=setup.precision, context=context)
        log.event(c.EVAL_ACCURACY, value, metadata={c.SAMPLES_COUNT: consumed})
        log.end(c.EVAL_STOP, metadata={c.SAMPLES_COUNT: consumed})
        rate = consumed * config.seq_len / (time.perf_counter() - started)
        context.note("llama31_8b", f"step {step} ({consumed} sequences): train loss {loss:.4f}, validation log"
                     f" perplexity {value:.4f} (target {config.target}), {rate:,.0f} tokens/s")
        if value <= config.target:
            status = c.SUCCESS
            break
        if step < last_step:
            log.start(c.BLOCK_START, metadata={c.SAMPLES_COUNT: consumed})
    log.end(c.RUN_STOP, metadata={c.STATUS: status})
    return status


def config_from_args(args: argparse.Namespace, env: dict[str, str]) -> TrainConfig:
    preset = args.preset or preset_from(env)
    assignments = [*env_assignments(env), *args.set]
    config = build(preset, assignments)
    if config.submission_platform == "unknown":
        config = build(preset, [*assignments, f"submission_platform={platform.node() or 'unknown'}"])
    return config


def _main(argv: list[str] | None) -> None:
    args = parse_args(argv)
    if args.seed < RANDOM_SEED:
        raise SettingsError(f"--seed must be a non-negative integer or -1 (drawn at random), got {args.seed}")
    environment = Environment.read(os.environ)
    config = config_from_args(args, dict(os.environ))
    with distributed.joined(pick_device(config.device)) as context:
        train(config, data_dir=args.data, results_dir=args.results, seed=args.seed, context=context,
              environment=environment)


def main(argv: list[str] | None = None) -> int:
    return run_main(lambda: _main(argv), prefix="llama31_8b")


if __name__ == "__main__":
    sys.exit(main())
