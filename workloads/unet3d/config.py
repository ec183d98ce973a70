"""Typed configuration of a unet3d training run, from the command line and the environment: every
knob of the workload and its default, in one place.

Defaults are the reference's (``run_and_time.sh`` of the MLPerf unet3d benchmark): batch 2,
patch 128^3, SGD Nesterov momentum 0.9, base LR 0.8 with 200 warmup epochs from 1e-4, the
closed-division model. Eval start, eval interval and the epoch cap default to the rules'
scaling by samples per epoch (see ``Schedule``). They are written once, in ``TrainConfig``; the
command line's defaults are read from it (``workloads.unet3d.knobs``: the command line and the
environment's knobs, parsed into a ``TrainConfig``).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path

from workloads.unet3d.cuts import Cuts
from workloads.unet3d.model import UNet3DConfig
from workloads.unet3d.precision import REQUESTS, normalise
from workloads.unet3d.settings import StepKnobs

DIVISIONS = ("closed", "open")
STATUSES = ("onprem", "cloud", "preview", "research")
REFERENCE_EVAL_START_SAMPLES = 1000 * 168  # start_eval_at 1000 epochs of 168 samples
REFERENCE_EVAL_EVERY_SAMPLES = 20 * 168
REFERENCE_MAX_SAMPLES = 10000 * 168


def triple(text: str) -> tuple[int, int, int]:
    values = tuple(int(v) for v in text.split(","))
    if len(values) == 1:
        values = values * 3
    if len(values) != 3 or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected D,H,W (or one size), got {text!r}")
    return values  # type: ignore[return-value]


def int_list(text: str) -> tuple[int, ...]:
    return tuple(int(v) for v in text.split(",") if v.strip())


def auto_int(text: str) -> int | None:
    """``auto`` (or empty) -> None, else a whole number."""
    if text.strip().lower() in ("", "auto"):
        return None
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected auto or a whole number, got {text!r}") from None


def auto_bool(text: str) -> bool | None:
    """``auto`` (or empty) -> None; 1/0, true/false, on/off."""
    value = text.strip().lower()
    if value in ("", "auto"):
        return None
    if value in ("1", "true", "on", "yes"):
        return True
    if value in ("0", "false", "off", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected auto, 1 or 0, got {text!r}")


def precision_arg(text: str) -> str:
    try:
        return normalise(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    """Everything one training run needs."""

    data_dir: Path
    """Preprocessed dataset (``case_XXXXX_x.npy`` / ``_y.npy``)."""
    results_dir: Path
    """Writable folder for the MLLOG file."""
    seed: int = -1
    """Master seed; -1 draws one from the OS."""
    quality_threshold: float = 0.908
    """Mean Dice at which the run stops with success."""
    model: UNet3DConfig = field(default_factory=UNet3DConfig)
    """Net width and depth."""
    batch_size: int = 2
    """Samples per process per step."""
    ga_steps: int = 1
    """Gradient accumulation steps."""
    input_shape: tuple[int, int, int] = (128, 128, 128)
    """Training patch (D, H, W)."""
    val_input_shape: tuple[int, int, int] = (128, 128, 128)
    """Sliding-window size (D, H, W)."""
    overlap: float = 0.5
    """Sliding-window overlap."""
    oversampling: float = 0.4
    """Probability of a foreground crop."""
    learning_rate: float = 0.8
    """Base learning rate (after warmup)."""
    init_learning_rate: float = 1e-4
    """Learning rate the linear warmup starts from."""
    lr_warmup_epochs: int = 200
    """Epochs of linear warmup (0: none)."""
    lr_decay_epochs: tuple[int, ...] = ()
    """Epochs after which the learning rate is multiplied by ``lr_decay_factor``."""
    lr_decay_factor: float = 1.0
    """Multi-step decay factor."""
    momentum: float = 0.9
    """SGD (Nesterov) momentum."""
    weight_decay: float = 0.0
    """SGD weight decay."""
    max_epochs: int | None = None
    """Epoch cap; None: ceil(10000 * N / samples_per_epoch), N training cases (the reference script passes 4000)."""
    start_eval_at: int | None = None
    """First evaluated epoch; None: ceil(1000 * N / samples_per_epoch)."""
    evaluate_every: int | None = None
    """Epochs between evaluations; None: ceil(20 * N / samples_per_epoch)."""
    precision: str = "auto"
    """Autocast: "auto" (resolved per device, see precision.py), "fp32", "bf16" or "fp16"."""
    channels_last: bool | None = None
    """Use the channels_last_3d memory format; None: auto (on CUDA with compile, see settings.py)."""
    compile: bool = False
    """torch.compile the model (compiled and warmed up before run_start)."""
    step: StepKnobs = field(default_factory=StepKnobs)
    """How the step runs: compile mode, cuDNN autotuner, fused loss, pinned staging (settings.py)."""
    num_workers: int | None = None
    """DataLoader worker processes per rank; None: auto (CUDA: CPUs per local rank - 1, at least 2, at most 8;
    CPU: 0; see settings.py)."""
    threads: int | None = None
    """torch intra-op threads per rank; None: auto (usable CPUs / processes per node)."""
    eval_batch: int | None = None
    """Sliding windows per forward pass in evaluation; None: auto (CUDA 4, CPU 1)."""
    cuts: Cuts = field(default_factory=Cuts)
    """Evaluation and training cases left out, evaluation volumes cropped (cuts.py); default: none."""
    force_open: str | None = None
    """Why the division is forced to open (SUBMISSION_DIVISION=open, --division open); None: decided by the rules."""
    seeds_random: bool = False
    """The caller drew the seed at random (MLTRAIN_SEEDS_RANDOM=1); a seed of -1 is drawn here."""
    submission_org: str = "mltrain"
    """Logged in submission_org."""
    submission_platform: str | None = None
    """Logged in submission_platform; None: the device's name."""
    submission_status: str = "onprem"
    """Logged in submission_status."""
    log_name: str = "unet3d.log"
    """MLLOG file name inside ``results_dir``."""
    save_model: bool = True
    """Write the trained weights into ``results_dir`` after run_stop (``model.pt``, ``model.json``):
    what ``python -m workloads.unet3d.export`` (``mltrain export RUN --model``) makes an inference model of."""

    def __post_init__(self) -> None:
        checks = [
            (self.seed >= -1, f"seed must be >= -1, got {self.seed}"),
            (0.0 < self.quality_threshold <= 1.0, f"quality threshold must be in (0, 1], got {self.quality_threshold}"),
            (self.batch_size >= 1 and self.ga_steps >= 1, "batch size and ga steps must be >= 1"),
            (0.0 <= self.overlap < 1.0, f"overlap must be in [0, 1), got {self.overlap}"),
            (0.0 <= self.oversampling <= 1.0, f"oversampling must be in [0, 1], got {self.oversampling}"),
            (self.learning_rate > 0 and self.init_learning_rate >= 0, "learning rates must be positive"),
            (self.lr_warmup_epochs >= 0, "lr warmup epochs must be >= 0"),
            (self.momentum >= 0 and self.weight_decay >= 0, "momentum and weight decay must be >= 0"),
            (self.precision in REQUESTS, f"precision must be one of {REQUESTS}, got {self.precision!r}"),
            (self.submission_status in STATUSES, f"submission status must be one of {STATUSES}"),
            (self.num_workers is None or self.num_workers >= 0, "num workers must be >= 0"),
            (self.threads is None or self.threads >= 1, "threads must be >= 1"),
            (self.eval_batch is None or self.eval_batch >= 1, "eval batch must be >= 1"),
            (bool(self.submission_org) and self.submission_platform != "", "submission org/platform must not be empty"),
        ]
        for name in ("max_epochs", "start_eval_at", "evaluate_every"):
            value = getattr(self, name)
            checks.append((value is None or value >= 1, f"{name} must be >= 1, got {value}"))
        for ok, message in checks:
            if not ok:
                raise ValueError(message)
        for name in ("input_shape", "val_input_shape"):
            shape = getattr(self, name)
            bad = [s for s in shape if s % self.model.divisor]
            if bad:
                raise ValueError(f"{name} {shape}: every side must be a multiple of {self.model.divisor}")
            if min(shape) // self.model.divisor < 2:
                raise ValueError(f"{name} {shape}: too small for {len(self.model.filters)} levels (min side "
                                 f"{2 * self.model.divisor})")

    @property
    def log_path(self) -> Path:
        return self.results_dir / self.log_name


@dataclass(frozen=True, kw_only=True)
class Schedule:
    """Epoch-level schedule of a run, once samples per epoch are known."""

    samples_per_epoch: int
    """Training samples seen per epoch over all ranks (last incomplete batch dropped)."""
    start_eval_at: int
    """First evaluated epoch."""
    evaluate_every: int
    """Epochs between evaluations."""
    max_epochs: int
    """Epoch cap."""

    def __post_init__(self) -> None:
        if min(self.samples_per_epoch, self.start_eval_at, self.evaluate_every, self.max_epochs) < 1:
            raise ValueError(f"schedule values must be >= 1: {self}")

    def is_eval_epoch(self, epoch: int) -> bool:
        return epoch >= self.start_eval_at and (epoch - self.start_eval_at) % self.evaluate_every == 0

    def samples(self, epochs: int) -> int:
        """Training samples seen after ``epochs`` epochs: what the MLLOG epoch fields count. Since
        training 3.1 the unet3d RCPs count samples to converge (epochs x samples per epoch,
        mlcommons/logging#327), and the reference logs ``epoch_num``, ``first_epoch_num`` and
        ``epoch_count`` in samples to match (mlcommons/training#684)."""
        return epochs * self.samples_per_epoch


def resolve_schedule(config: TrainConfig, n_train: int, world_size: int) -> Schedule:
    """Rules' scaling: 1000, 20 and 10000 epochs of the reference's 168 samples, in this run's epochs
    (N training cases stand in for 168; identical for the real data)."""
    step_batch = config.batch_size * world_size  # what one loader step consumes over all ranks
    samples = (n_train // step_batch) * step_batch
    if samples < 1:
        raise ValueError(f"{n_train} training cases are fewer than one batch of {step_batch} over all ranks")
    scale = n_train / 168

    def scaled(reference_samples: int) -> int:
        return math.ceil(reference_samples * scale / samples)

    return Schedule(
        samples_per_epoch=samples,
        start_eval_at=config.start_eval_at or scaled(REFERENCE_EVAL_START_SAMPLES),
        evaluate_every=config.evaluate_every or scaled(REFERENCE_EVAL_EVERY_SAMPLES),
        max_epochs=config.max_epochs or scaled(REFERENCE_MAX_SAMPLES),
    )


def learning_rate(config: TrainConfig, epoch: int) -> float:
    """LR of ``epoch`` (1-based): linear warmup init -> base over the warmup epochs, then the
    base LR times the decay factor once per decay boundary already passed."""
    if config.lr_warmup_epochs and epoch <= config.lr_warmup_epochs:
        scale = epoch / config.lr_warmup_epochs
        return config.init_learning_rate + (config.learning_rate - config.init_learning_rate) * scale
    passed = sum(1 for boundary in config.lr_decay_epochs if boundary < epoch)
    return config.learning_rate * config.lr_decay_factor**passed


def default(name: str) -> object:
    """``TrainConfig``'s default of the field ``name``: the one place a default is written."""
    return {f.name: f.default for f in dataclasses.fields(TrainConfig)}[name]
