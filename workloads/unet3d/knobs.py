"""The unet3d command line and the environment's knobs: ``KNOBS`` names the environment variables (a
profile's ``env:`` in seeds.yaml) that set the options of ``train`` and ``throughput`` (the run scripts
pass the environment through untouched); ``config_from_args`` parses them, then the command line, into
a ``TrainConfig`` (``workloads.unet3d.config``), whose defaults the options' are."""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from workloads.common.cli import Parser
from workloads.unet3d import config
from workloads.unet3d.config import (
    DIVISIONS,
    TrainConfig,
    auto_bool,
    auto_int,
    default,
    int_list,
    precision_arg,
    triple,
)
from workloads.unet3d.cuts import Cuts
from workloads.unet3d.model import CLOSED_FILTERS, UNet3DConfig
from workloads.unet3d.settings import COMPILE_MODES, StepKnobs

KNOBS: dict[str, str] = {
    "FILTERS": "--filters",
    "INPUT_SHAPE": "--input-shape",
    "VAL_INPUT_SHAPE": "--val-input-shape",
    "BATCH_SIZE": "--batch-size",
    "GRADIENT_ACCUMULATION_STEPS": "--ga-steps",
    "LEARNING_RATE": "--learning-rate",
    "INIT_LEARNING_RATE": "--init-learning-rate",
    "LR_WARMUP_EPOCHS": "--lr-warmup-epochs",
    "LR_DECAY_EPOCHS": "--lr-decay-epochs",
    "LR_DECAY_FACTOR": "--lr-decay-factor",
    "MAX_EPOCHS": "--max-epochs",
    "START_EVAL_AT": "--start-eval-at",
    "EVALUATE_EVERY": "--evaluate-every",
    "OVERSAMPLING": "--oversampling",
    "AMP": "--amp",
    "THREADS": "--threads",
    "NUM_WORKERS": "--num-workers",
    "CHANNELS_LAST": "--channels-last",
    "EVAL_BATCH": "--eval-batch",
    "COMPILE": "--compile",
    "COMPILE_MODE": "--compile-mode",
    "CUDNN_BENCHMARK": "--cudnn-benchmark",
    "FUSED_LOSS": "--fused-loss",
    "PIN_MEMORY": "--pin-memory",
    "EVAL_CASES": "--eval-cases",
    "EVAL_CROP": "--eval-crop",
    "TRAIN_CASES": "--train-cases",
    "SAVE_MODEL": "--save-model",
    "STEPS": "--steps",
    "WARMUP_STEPS": "--warmup-steps",
}
"""Environment variable -> the option it sets (its value the option's; unset or empty: the option's
default). ``COMPILE`` is a switch: 1 turns ``--compile`` on. QUALITY_THRESHOLD, MLTRAIN_PROFILE,
MLTRAIN_SEEDS_RANDOM and SUBMISSION_{ORG,PLATFORM,STATUS,DIVISION} are read by ``config_from_args``."""
SWITCHES = ("COMPILE",)
THROUGHPUT_KNOBS = ("STEPS", "WARMUP_STEPS", "FILTERS", "INPUT_SHAPE", "BATCH_SIZE", "LEARNING_RATE", "OVERSAMPLING",
                    "AMP", "THREADS", "NUM_WORKERS", "CHANNELS_LAST", "COMPILE", "COMPILE_MODE", "CUDNN_BENCHMARK",
                    "FUSED_LOSS", "PIN_MEMORY")
"""What the throughput mode takes: its steps, and the model and precision knobs of training."""
TRAIN_KNOBS = tuple(name for name in KNOBS if name not in ("STEPS", "WARMUP_STEPS"))


def env_argv(env: Mapping[str, str], names: Iterable[str]) -> list[str]:
    """The options the environment's knobs ``names`` stand for, in ``names``' order; a command line
    given after them wins (argparse keeps an option's last value)."""
    argv: list[str] = []
    for name in names:
        value = (env.get(name) or "").strip()
        if name in SWITCHES:
            argv += [KNOBS[name]] if value == "1" else []
        elif value:
            argv += [KNOBS[name], value]
    return argv


def add_step_knobs(p: argparse.ArgumentParser) -> None:
    """The options of ``StepKnobs`` (train and throughput take them alike)."""
    p.add_argument("--compile-mode", choices=COMPILE_MODES, default="default",
                   help="torch.compile's mode with --compile (reduce-overhead: CUDA graphs)")
    p.add_argument("--cudnn-benchmark", type=auto_bool, default=None, help="auto (default: on for CUDA), 1 or 0")
    p.add_argument("--fused-loss", type=auto_bool, default=None,
                   help="Dice+CE from one log-softmax pass: auto (default: off), 1 or 0")
    p.add_argument("--pin-memory", type=auto_bool, default=None,
                   help="pinned staging of the batches: auto (default: on for CUDA), 1 or 0")


def step_knobs(args: argparse.Namespace) -> StepKnobs:
    return StepKnobs(compile_mode=args.compile_mode, cudnn_benchmark=args.cudnn_benchmark,
                     fused_loss=args.fused_loss, pin_memory=args.pin_memory)


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="python -m workloads.unet3d.train", description=config.__doc__.splitlines()[0])
    p.add_argument("--data-dir", type=Path, required=True)
    p.add_argument("--results-dir", type=Path, required=True)
    p.add_argument("--seed", type=int, default=default("seed"))
    p.add_argument("--quality-threshold", type=float, default=None,
                   help=f"default: $QUALITY_THRESHOLD or {default('quality_threshold')}")
    p.add_argument("--filters", type=int_list, default=CLOSED_FILTERS, help="channels per level, e.g. 8,16,32")
    p.add_argument("--batch-size", type=int, default=default("batch_size"))
    p.add_argument("--ga-steps", type=int, default=default("ga_steps"))
    p.add_argument("--input-shape", type=triple, default=default("input_shape"))
    p.add_argument("--val-input-shape", type=triple, default=None, help="default: --input-shape")
    p.add_argument("--overlap", type=float, default=default("overlap"))
    p.add_argument("--oversampling", type=float, default=default("oversampling"))
    p.add_argument("--learning-rate", type=float, default=default("learning_rate"))
    p.add_argument("--init-learning-rate", type=float, default=default("init_learning_rate"))
    p.add_argument("--lr-warmup-epochs", type=int, default=default("lr_warmup_epochs"))
    p.add_argument("--lr-decay-epochs", type=int_list, default=default("lr_decay_epochs"))
    p.add_argument("--lr-decay-factor", type=float, default=default("lr_decay_factor"))
    p.add_argument("--momentum", type=float, default=default("momentum"))
    p.add_argument("--weight-decay", type=float, default=default("weight_decay"))
    p.add_argument("--max-epochs", type=int, default=None)
    p.add_argument("--start-eval-at", type=int, default=None)
    p.add_argument("--evaluate-every", type=int, default=None)
    p.add_argument("--amp", type=precision_arg, default=default("precision"),
                   help="auto (default), fp32 (none), bf16 or fp16")
    p.add_argument("--channels-last", type=auto_bool, nargs="?", const=True, default=None,
                   help="auto (default: on for CUDA with --compile), 1 or 0; alone: 1")
    p.add_argument("--compile", action="store_true")
    add_step_knobs(p)
    p.add_argument("--num-workers", type=auto_int, default=None, help="auto (default) or N loader processes")
    p.add_argument("--threads", type=auto_int, default=None, help="auto (default) or N intra-op threads")
    p.add_argument("--eval-batch", type=auto_int, default=None, help="auto (default: CUDA 4, CPU 1) or N windows")
    p.add_argument("--eval-cases", type=auto_int, default=None,
                   help="evaluate only the first N evaluation cases (default: all; a cut, logged)")
    p.add_argument("--eval-crop", type=triple, default=None,
                   help="crop evaluation volumes to at most D,H,W around the kidneys (default: whole; a cut, logged)")
    p.add_argument("--train-cases", type=auto_int, default=None,
                   help="train on only the first N training cases (default: all; a cut, logged)")
    p.add_argument("--save-model", type=auto_bool, default=None,
                   help="1 (default) or 0: the trained weights written into the results folder after run_stop")
    p.add_argument("--division", choices=DIVISIONS, default=None,
                   help="open forces the open division (so does $SUBMISSION_DIVISION=open or "
                        "MLTRAIN_PROFILE=smoke); closed is logged only when the rules allow it")
    return p


def config_from_args(argv: Sequence[str], env: Mapping[str, str]) -> TrainConfig:
    """Parse the environment's knobs (``KNOBS``), then ``argv``; env also supplies QUALITY_THRESHOLD,
    MLTRAIN_PROFILE, MLTRAIN_SEEDS_RANDOM and SUBMISSION_{ORG,PLATFORM,STATUS,DIVISION}.

    Raises SystemExit(2) (argparse) or ValueError with a one-line message."""
    args = build_parser().parse_args([*env_argv(env, TRAIN_KNOBS), *argv])
    quality = args.quality_threshold
    if quality is None:
        quality = float(env.get("QUALITY_THRESHOLD") or default("quality_threshold"))
    cuts = Cuts(eval_cases=args.eval_cases, eval_crop=args.eval_crop, train_cases=args.train_cases)
    force_open = None
    if args.division == "open":
        force_open = "--division open"
    elif env.get("SUBMISSION_DIVISION") == "open":
        force_open = "SUBMISSION_DIVISION=open"
    elif env.get("MLTRAIN_PROFILE") == "smoke":
        force_open = "the smoke profile"
    elif cuts.any:
        force_open = "the data is cut (--eval-cases, --eval-crop or --train-cases)"
    elif env.get("SUBMISSION_DIVISION") not in (None, "", *DIVISIONS):
        raise ValueError(f"SUBMISSION_DIVISION must be closed or open, got {env.get('SUBMISSION_DIVISION')!r}")
    return TrainConfig(
        data_dir=args.data_dir,
        results_dir=args.results_dir,
        seed=args.seed,
        quality_threshold=quality,
        model=UNet3DConfig(filters=tuple(args.filters)),
        batch_size=args.batch_size,
        ga_steps=args.ga_steps,
        input_shape=args.input_shape,
        val_input_shape=args.val_input_shape or args.input_shape,
        overlap=args.overlap,
        oversampling=args.oversampling,
        learning_rate=args.learning_rate,
        init_learning_rate=args.init_learning_rate,
        lr_warmup_epochs=args.lr_warmup_epochs,
        lr_decay_epochs=tuple(args.lr_decay_epochs),
        lr_decay_factor=args.lr_decay_factor,
        momentum=args.momentum,
        weight_decay=args.weight_decay,
        max_epochs=args.max_epochs,
        start_eval_at=args.start_eval_at,
        evaluate_every=args.evaluate_every,
        precision=args.amp,
        channels_last=args.channels_last,
        compile=args.compile,
        step=step_knobs(args),
        num_workers=args.num_workers,
        threads=args.threads,
        eval_batch=args.eval_batch,
        cuts=cuts,
        force_open=force_open,
        seeds_random=env.get("MLTRAIN_SEEDS_RANDOM") == "1",
        submission_org=env.get("SUBMISSION_ORG") or default("submission_org"),
        submission_platform=env.get("SUBMISSION_PLATFORM") or None,
        submission_status=env.get("SUBMISSION_STATUS") or default("submission_status"),
        save_model=default("save_model") if args.save_model is None else args.save_model,
    )
