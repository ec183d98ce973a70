"""Typed configuration of a ResNet-50 training run, and its named presets.

``closed(global_batch)`` takes the hyperparameters of the MLPerf reference convergence point (RCP)
for the global batch the run actually uses (408 images per process: 3264 on 8 GPUs, 1632 on 4);
where the table has no point for that batch it takes the nearest point's, and the run is logged
``open`` (see division.py). ``smoke()`` is the same code path scaled down (narrow network, 32x32
crops of the synthetic dataset) so that a 2-core CPU reaches 0.759 top-1 in well under a minute.
``build(preset, processes, assignments)`` is how the command lines get a config; ``preset_from`` and
``env_assignments`` read the preset and the assignments from the environment (the knobs a profile
sets, named below): every knob of the workload and its default live in this module.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass

from workloads.common.errors import SettingsError
from workloads.common.precision import ALIASES
from workloads.resnet50 import rcp

OPTIMIZERS = ("sgd", "lars")
PRECISIONS = tuple(ALIASES)
"""auto, fp32 (alias none), bf16, fp16: what the common precision rule accepts."""
DEVICES = ("auto", "cpu", "cuda")
DECODERS = ("auto", "pil", "torchvision", "dali")
REFERENCE_BATCH = 3264
"""The global batch of the closed preset on 8 processes (8 x 408)."""


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    """Everything one run needs besides the process layout."""

    # model
    width: int = 64
    """Stem and first-stage channels (64 is ResNet-50)."""
    layers: tuple[int, int, int, int] = (3, 4, 6, 3)
    """Bottlenecks per stage ((3, 4, 6, 3) is ResNet-50)."""
    # data
    crop: int = 224
    """Training and evaluation crop side."""
    eval_resize: int = 256
    """Shorter side before the evaluation centre crop."""
    workers: int = 8
    """Loader worker processes per training process (0: load in the training process)."""
    decode: str = "auto"
    """JPEG decoding: 'pil' (CPU workers), 'torchvision' (nvJPEG on the GPU), 'dali', or 'auto'
    (torchvision on a GPU when importable, else DALI when installed, else PIL)."""
    batch_size: int = 408
    """Images per optimizer step per process; the global batch is this times the processes."""
    eval_batch_size: int = 256
    """Images per evaluation step per process."""
    # optimization
    optimizer: str = "lars"
    """'lars' or 'sgd'."""
    base_lr: float = 10.5
    """Learning rate at the end of warmup."""
    end_lr: float = 0.0001
    """Learning rate at the end of the polynomial decay (0.0001 in the closed rules)."""
    poly_power: float = 2.0
    """Exponent of the polynomial decay (2 in the closed rules)."""
    warmup_epochs: float = 2.0
    """Epochs of linear warmup."""
    decay_epochs: float = 37.0
    """Epochs of polynomial decay after warmup (decay steps = this * train images / global batch)."""
    momentum: float = 0.9
    """Momentum of SGD or LARS."""
    weight_decay: float = 5e-5
    """L2 weight decay of convolution and classifier weights (0.0001 * 2**k in the closed rules)."""
    lars_eta: float = 0.001
    """LARS trust coefficient."""
    lars_epsilon: float = 0.0
    """LARS epsilon (0 in the closed rules)."""
    label_smoothing: float = 0.1
    """Label smoothing of the cross-entropy (0 or 0.1)."""
    # schedule of the run
    max_epochs: int = 41
    """Epoch cap; reaching it without the target ends the run as aborted."""
    eval_every: int = 4
    """Evaluate every this many epochs (4 in the closed rules)."""
    eval_offset: int = 0
    """First evaluation after eval_every - eval_offset epochs (0 to 3 in the closed rules)."""
    target: float = 0.759
    """Top-1 accuracy at which the run stops with success."""
    # execution
    precision: str = "auto"
    """'auto' (by device: precision.py), 'fp32' (alias 'none'), 'bf16' or 'fp16' (with a GradScaler)."""
    device: str = "auto"
    """'auto' (CUDA when available), 'cpu' or 'cuda'."""
    channels_last: bool = True
    """Channels-last memory format for the model and its inputs."""
    compile: bool = False
    """torch.compile the model (opt-in: compilation takes minutes before run_start)."""
    threads: int = 0
    """torch intra-op threads per process (0 or 'auto': the CPUs this process may use / processes)."""
    finite_check_steps: int = 50
    """Steps between the checks that the loss stayed finite (each check waits for the device once)."""
    memory_check: bool = True
    """Refuse at start-up a batch_size the GPU's memory cannot hold (memory.py); false: try anyway."""
    # MLPerf submission fields
    submission_org: str = "mltrain"
    """Organization that ran the benchmark."""
    submission_platform: str = "unknown"
    """System name (set by the launcher; 'unknown' if not)."""
    submission_status: str = "onprem"
    """'cloud', 'onprem', 'preview' or 'research'."""

    def __post_init__(self) -> None:
        problems = [
            ("width", self.width >= 1),
            ("layers", len(self.layers) == 4 and all(n >= 1 for n in self.layers)),
            ("crop", self.crop >= 8),
            ("eval_resize", self.eval_resize >= self.crop),
            ("workers", self.workers >= 0),
            ("batch_size", self.batch_size >= 1),
            ("eval_batch_size", self.eval_batch_size >= 1),
            ("optimizer", self.optimizer in OPTIMIZERS),
            ("base_lr", self.base_lr > 0),
            ("end_lr", 0 <= self.end_lr <= self.base_lr),
            ("poly_power", self.poly_power > 0),
            ("warmup_epochs", self.warmup_epochs >= 0),
            ("decay_epochs", self.decay_epochs > 0),
            ("momentum", 0 <= self.momentum < 1),
            ("weight_decay", self.weight_decay >= 0),
            ("lars_eta", self.lars_eta > 0),
            ("lars_epsilon", self.lars_epsilon >= 0),
            ("label_smoothing", 0 <= self.label_smoothing < 1),
            ("max_epochs", self.max_epochs >= 1),
            ("eval_every", self.eval_every >= 1),
            ("eval_offset", 0 <= self.eval_offset < self.eval_every),
            ("target", 0 < self.target <= 1),
            ("precision", self.precision in PRECISIONS),
            ("device", self.device in DEVICES),
            ("decode", self.decode in DECODERS),
            ("threads", self.threads >= 0),
            ("finite_check_steps", self.finite_check_steps >= 1),
            ("submission_status", self.submission_status in ("cloud", "onprem", "preview", "research")),
        ]
        for name, ok in problems:
            if not ok:
                raise SettingsError(f"invalid {name}: {getattr(self, name)!r}")

    def is_eval_epoch(self, epoch: int) -> bool:
        """Whether to evaluate after ``epoch`` (1-based): epochs every-offset, 2*every-offset, ..."""
        return (epoch + self.eval_offset) % self.eval_every == 0


def closed(global_batch: int = REFERENCE_BATCH) -> TrainConfig:
    """MLPerf closed division with the hyperparameters of the RCP for ``global_batch`` (or of the
    nearest RCP when there is none for it: such a run is open). 408 images per process."""
    point = rcp.find(global_batch) or rcp.nearest(global_batch)
    return TrainConfig(
        base_lr=point.base_lr,
        warmup_epochs=point.warmup_epochs,
        decay_epochs=point.decay_epochs,
        momentum=point.momentum,
        weight_decay=point.weight_decay,
        max_epochs=math.ceil(point.warmup_epochs + point.decay_epochs) + 2,
    )


def smoke() -> TrainConfig:
    """Scaled down for a shared 2-core CPU on the synthetic dataset (``dataset synthesize`` defaults).

    One intra-op thread and decoding in the training process: 40x40 JPEGs decode in microseconds,
    and a second busy thread or process only fights the first for the cores. Evaluating after every
    epoch (the closed rules: every 4) stops the run as soon as it reaches the target.
    """
    return TrainConfig(
        width=16,
        crop=32,
        eval_resize=36,
        workers=0,
        threads=1,
        batch_size=64,
        eval_batch_size=100,
        optimizer="lars",
        base_lr=2.0,
        warmup_epochs=1.0,
        decay_epochs=7.0,
        weight_decay=5e-5,
        max_epochs=8,
        eval_every=1,
        eval_offset=0,
    )


PRESETS = {"closed": closed, "smoke": smoke}


def _parse(field_name: str, text: str, current: object) -> object:
    if field_name == "threads" and text == "auto":
        return 0
    if isinstance(current, bool):
        if text.lower() not in ("1", "0", "true", "false", "yes", "no"):
            raise ValueError(f"{field_name}: expected true or false, got {text!r}")
        return text.lower() in ("1", "true", "yes")
    if isinstance(current, tuple):
        return tuple(int(part) for part in text.split(","))
    if isinstance(current, (int, float, str)):
        return type(current)(text)
    raise ValueError(f"{field_name}: cannot be set from text")


def with_overrides(config: TrainConfig, assignments: list[str]) -> TrainConfig:
    """Apply ``name=value`` assignments (values parsed as the field's type); SettingsError names the field."""
    known = {field.name for field in dataclasses.fields(config)}
    changes: dict[str, object] = {}
    for assignment in assignments:
        name, sep, text = assignment.partition("=")
        if not sep or name not in known:
            raise SettingsError(f"unknown setting {assignment!r} (expected NAME=VALUE, NAME a TrainConfig field)")
        try:
            changes[name] = _parse(name, text, getattr(config, name))
        except ValueError as exc:
            raise SettingsError(f"invalid {name}={text!r}: {exc}") from None
    return dataclasses.replace(config, **changes)


def build(preset: str, processes: int, assignments: list[str]) -> TrainConfig:
    """The preset's config with ``assignments`` applied; the closed preset takes the RCP
    hyperparameters of the global batch it will run with (per-process batch x ``processes``),
    and explicit assignments still win over them."""
    if preset not in PRESETS:
        raise SettingsError(f"unknown preset {preset!r} (one of {', '.join(sorted(PRESETS))})")
    config = with_overrides(PRESETS[preset](), assignments)
    if preset == "closed":
        config = with_overrides(closed(config.batch_size * processes), assignments)
    return config


# ---- the environment: a profile's `env:` (seeds.yaml), passed through untouched by the run scripts ----

PRESET_ENV = "RESNET50_PRESET"
"""closed or smoke; unset: smoke under MLTRAIN_PROFILE=smoke, else closed."""
SET_ENV = "RESNET50_SET"
"""Space-separated NAME=VALUE overrides of TrainConfig fields (e.g. "precision=fp16 workers=4")."""
PLATFORM_ENV = "RESNET50_PLATFORM"
"""submission_platform for the log (default: the host name)."""
THREADS_ENV = "THREADS"
"""torch threads per process: auto (the CPUs this process may use / processes per node) or N."""
TARGET_ENV = "QUALITY_THRESHOLD"
"""The top-1 target (workload.yaml's quality.env); default: the preset's."""
THROUGHPUT_STEPS = {"STEPS": 20, "WARMUP_STEPS": 5}
"""The throughput mode's timed and untimed steps, and their defaults (the workload contract's)."""
INPUT_SHAPE_ENV = "INPUT_SHAPE"
"""The throughput mode's crop side N or N,N (default: the preset's)."""


@dataclass(frozen=True, kw_only=True)
class Environment:
    """What the caller says through the environment about the division."""

    seeds_random: bool = False
    """MLTRAIN_SEEDS_RANDOM=1: the caller drew the seed at random."""
    force_open: bool = False
    """SUBMISSION_DIVISION=open."""

    @classmethod
    def read(cls, env: Mapping[str, str]) -> Environment:
        division = env.get("SUBMISSION_DIVISION", "")
        if division not in ("", "open", "closed"):
            raise SettingsError(f"SUBMISSION_DIVISION must be open or closed, got {division!r}")
        return cls(seeds_random=env.get("MLTRAIN_SEEDS_RANDOM", "") == "1", force_open=division == "open")


def preset_from(env: Mapping[str, str]) -> str:
    """The preset the environment asks for (``PRESET_ENV``)."""
    return env.get(PRESET_ENV) or ("smoke" if env.get("MLTRAIN_PROFILE") == "smoke" else "closed")


def env_assignments(env: Mapping[str, str]) -> list[str]:
    """The TrainConfig assignments the environment makes, in the order they apply (a later one wins):
    ``SET_ENV``'s, then the platform and the threads."""
    assignments = (env.get(SET_ENV) or "").split()
    if env.get(PLATFORM_ENV):
        assignments.append(f"submission_platform={env[PLATFORM_ENV]}")
    if env.get(THREADS_ENV):
        assignments.append(f"threads={env[THREADS_ENV]}")
    return assignments


def env_count(env: Mapping[str, str], name: str) -> int:
    """The non-negative whole number in ``name`` (one of ``THROUGHPUT_STEPS``), else its default."""
    text = (env.get(name) or "").strip()
    if not text:
        return THROUGHPUT_STEPS[name]
    if not text.isdigit():
        raise SettingsError(f"{name} must be a non-negative integer, got {text!r}")
    return int(text)
