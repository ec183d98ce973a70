"""Typed configuration of a llama31_8b run, its presets, and the environment knobs a profile sets.

``closed(global_batch)``: the rules of mlperf_logging's ``training_6.1.0/closed_llama31_8b.yaml``
(AdamW 0.9/0.95/1e-5, weight decay 0.1, clip 1.0, cosine with linear warmup, 1,200,000 max steps,
sequence 8192, 1,024 evaluation sequences, log perplexity 3.3) with the learning rate and warmup of
the RCP for the run's global batch (``rcp.py``; the nearest point's where the table has none, and
the run is open). Evaluation every 12,288 sequences as the reference does. ``smoke()`` is the
same code at a tiny width and depth on the synthetic token data (``synthesize``'s defaults), to a
log perplexity of 0.9 (the open rules accept a value below 1.0) that a 2-core CPU reaches in
seconds. ``build(preset, assignments)`` is how the command lines get a config;
``preset_from``/``env_assignments`` read the environment.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from workloads.common.errors import SettingsError
from workloads.common.precision import ALIASES
from workloads.llama31_8b import rcp
from workloads.llama31_8b.model import LLAMA31_8B, Shape

REFERENCE_BATCH = 32
"""The reference's global batch (config_H200_1x8x1_8b.sh: GBS=32)."""
MAX_STEPS = 1_200_000
"""The rules' fixed ``max_steps``: the cosine decays over this less the warmup."""
DEVICES = ("auto", "cpu", "cuda")
SHAPE_FIELDS = ("vocab", "dim", "layers", "heads", "kv_heads", "ffn", "seq_len")


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    """Everything one run needs besides the process layout."""

    # model (model.Shape's fields; the benchmark's by default)
    vocab: int = LLAMA31_8B.vocab
    dim: int = LLAMA31_8B.dim
    layers: int = LLAMA31_8B.layers
    heads: int = LLAMA31_8B.heads
    kv_heads: int = LLAMA31_8B.kv_heads
    ffn: int = LLAMA31_8B.ffn
    seq_len: int = LLAMA31_8B.seq_len
    # batch
    global_batch: int = REFERENCE_BATCH
    """Sequences per optimizer step over all processes."""
    micro_batch: int = 1
    """Sequences per forward pass of one process; the rest of its share is gradient accumulation."""
    # optimization
    base_lr: float = 8e-4
    end_lr_ratio: float = 0.1
    """The cosine ends at base_lr times this (the reference: min_lr = 0.1 * max_lr)."""
    warmup_samples: int = 4096
    """Sequences of linear warmup (the RCP's ``opt_learning_rate_warmup_samples``)."""
    max_steps: int = MAX_STEPS
    beta1: float = 0.9
    beta2: float = 0.95
    eps: float = 1e-5
    weight_decay: float = 0.1
    clip: float = 1.0
    # schedule of the run
    eval_every: int = 12_288
    """Evaluate every this many training sequences."""
    start_eval_at: int = 0
    """No evaluation before this many training sequences."""
    eval_samples: int = 1024
    """Validation sequences evaluated (the first ones, unshuffled)."""
    target: float = 3.3
    """Validation log perplexity at which the run stops with success."""
    stop_after_steps: int = 0
    """Stop (aborted, after a last evaluation) after this many steps; 0: only the target or max_steps."""
    train_shards: str = "6"
    """Training shards c4-train.en_<i> read (comma-separated; the reference: 6 unless --use_full_dataset)."""
    # execution
    precision: str = "auto"
    device: str = "auto"
    checkpointing: bool = True
    """Activation checkpointing of every block (recompute in the backward pass)."""
    threads: int = 0
    """torch intra-op threads per process (0 or 'auto': the CPUs this process may use / processes)."""
    # MLPerf submission fields
    submission_org: str = "mltrain"
    submission_platform: str = "unknown"
    submission_status: str = "onprem"

    def __post_init__(self) -> None:
        problems = [
            ("global_batch", self.global_batch >= 1), ("micro_batch", self.micro_batch >= 1),
            ("base_lr", self.base_lr > 0), ("end_lr_ratio", 0 <= self.end_lr_ratio <= 1),
            ("warmup_samples", self.warmup_samples >= 0), ("max_steps", self.max_steps >= 1),
            ("beta1", 0 <= self.beta1 < 1), ("beta2", 0 <= self.beta2 < 1), ("eps", self.eps > 0),
            ("weight_decay", self.weight_decay >= 0), ("clip", self.clip > 0),
            ("eval_every", self.eval_every >= 1), ("start_eval_at", self.start_eval_at >= 0),
            ("eval_samples", self.eval_samples >= 1), ("target", self.target > 0),
            ("stop_after_steps", self.stop_after_steps >= 0), ("precision", self.precision in ALIASES),
            ("device", self.device in DEVICES), ("threads", self.threads >= 0),
            ("submission_status", self.submission_status in ("cloud", "onprem", "preview", "research")),
        ]
        for name, ok in problems:
            if not ok:
                raise SettingsError(f"invalid {name}: {getattr(self, name)!r}")
        try:
            _ = (self.shape, self.shards)
        except ValueError as exc:
            raise SettingsError(f"invalid model shape or shards: {exc}") from None

    @property
    def shape(self) -> Shape:
        return Shape(**{name: getattr(self, name) for name in SHAPE_FIELDS})

    @property
    def shards(self) -> tuple[int, ...]:
        found = tuple(int(part) for part in self.train_shards.split(","))
        if not found or any(not 0 <= shard <= 7 for shard in found):
            raise ValueError(f"train_shards {self.train_shards!r}: c4-train.en_0 to en_7")
        return found

    @property
    def warmup_steps(self) -> int:
        return self.warmup_samples // self.global_batch

    @property
    def end_lr(self) -> float:
        return self.base_lr * self.end_lr_ratio

    @property
    def eval_every_steps(self) -> int:
        """Steps between evaluations: ceil(eval_every / global_batch), as the reference rounds."""
        return -(-self.eval_every // self.global_batch)

    def micro_batch_for(self, processes: int) -> int:
        """The micro-batch one process runs: ``micro_batch``, or its share of the global batch where that
        is smaller (the smoke preset's 16 sequences on 2 processes: 8 each, in one micro-batch)."""
        return max(1, min(self.micro_batch, self.global_batch // processes))

    def accumulation(self, processes: int) -> int:
        """Micro-batches per process per step; SettingsError when the global batch does not split."""
        micro = self.micro_batch_for(processes)
        share, left = divmod(self.global_batch, processes * micro)
        if left or share < 1:
            raise SettingsError(f"global_batch {self.global_batch} does not split into {processes} process(es) "
                                f"x micro_batch {micro} x a whole number of accumulation steps")
        return share

    def is_eval_step(self, step: int) -> bool:
        """Whether to evaluate after optimizer step ``step`` (1-based)."""
        return step % self.eval_every_steps == 0 and step * self.global_batch >= self.start_eval_at


def closed(global_batch: int = REFERENCE_BATCH) -> TrainConfig:
    """The closed rules with the RCP's learning rate and warmup for ``global_batch`` (the nearest
    point's when the table has none for it: such a run is open)."""
    point = rcp.find(global_batch) or rcp.nearest(global_batch)
    return TrainConfig(global_batch=global_batch, base_lr=point.base_lr, warmup_samples=point.warmup_samples)


def smoke() -> TrainConfig:
    """A 2-layer model of width 64 over 64 tokens of the synthetic data's 256-token vocabulary, one
    thread, fp32 (tiny matmuls gain nothing from bf16), evaluating every 128 sequences on 128."""
    return TrainConfig(
        vocab=256, dim=64, layers=2, heads=4, kv_heads=2, ffn=192, seq_len=64, global_batch=16, micro_batch=16,
        base_lr=3e-3, warmup_samples=160, max_steps=400, eval_every=128, eval_samples=128, target=0.9,
        checkpointing=False, precision="fp32", threads=1,
    )


PRESETS = {"closed": closed, "smoke": smoke}


def _parse(name: str, text: str, current: object) -> object:
    if name == "threads" and text == "auto":
        return 0
    if isinstance(current, bool):
        if text.lower() not in ("1", "0", "true", "false", "yes", "no"):
            raise ValueError(f"expected true or false, got {text!r}")
        return text.lower() in ("1", "true", "yes")
    if isinstance(current, (int, float, str)):
        return type(current)(text)
    raise ValueError("cannot be set from text")


def with_overrides(config: TrainConfig, assignments: list[str]) -> TrainConfig:
    """``name=value`` assignments applied (parsed as the field's type); SettingsError names the field."""
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


def build(preset: str, assignments: list[str]) -> TrainConfig:
    """The preset with ``assignments`` applied; the closed preset takes the RCP hyperparameters of
    the global batch it ends with, and explicit assignments still win over them."""
    if preset not in PRESETS:
        raise SettingsError(f"unknown preset {preset!r} (one of {', '.join(sorted(PRESETS))})")
    config = with_overrides(PRESETS[preset](), assignments)
    if preset == "closed":
        config = with_overrides(closed(config.global_batch), assignments)
    return config


# ---- the environment: a profile's `env:` (seeds.yaml), passed through untouched by the run scripts ----

PRESET_ENV = "LLAMA31_8B_PRESET"
"""closed or smoke; unset: smoke under MLTRAIN_PROFILE=smoke, else closed."""
SET_ENV = "LLAMA31_8B_SET"
"""Space-separated NAME=VALUE overrides of TrainConfig fields (e.g. "layers=4 micro_batch=2")."""
PLATFORM_ENV = "LLAMA31_8B_PLATFORM"
"""submission_platform for the log (default: the host name)."""
THREADS_ENV = "THREADS"
TARGET_ENV = "QUALITY_THRESHOLD"
"""The log-perplexity target (workload.yaml's quality.env); default: the preset's."""
THROUGHPUT_STEPS = {"STEPS": 20, "WARMUP_STEPS": 5}
"""The throughput mode's timed and untimed steps, and their defaults (the workload contract's)."""


@dataclass(frozen=True, kw_only=True)
class Environment:
    """What the caller says through the environment about the division."""

    seeds_random: bool = False
    force_open: bool = False

    @classmethod
    def read(cls, env: Mapping[str, str]) -> Environment:
        division = env.get("SUBMISSION_DIVISION", "")
        if division not in ("", "open", "closed"):
            raise SettingsError(f"SUBMISSION_DIVISION must be open or closed, got {division!r}")
        return cls(seeds_random=env.get("MLTRAIN_SEEDS_RANDOM", "") == "1", force_open=division == "open")


def preset_from(env: Mapping[str, str]) -> str:
    return env.get(PRESET_ENV) or ("smoke" if env.get("MLTRAIN_PROFILE") == "smoke" else "closed")


def env_assignments(env: Mapping[str, str]) -> list[str]:
    """The environment's assignments in the order they apply: ``SET_ENV``'s, the platform, the
    threads, the target."""
    assignments = (env.get(SET_ENV) or "").split()
    if env.get(PLATFORM_ENV):
        assignments.append(f"submission_platform={env[PLATFORM_ENV]}")
    if env.get(THREADS_ENV):
        assignments.append(f"threads={env[THREADS_ENV]}")
    if env.get(TARGET_ENV):
        assignments.append(f"target={env[TARGET_ENV]}")
    return assignments


def env_count(env: Mapping[str, str], name: str) -> int:
    """The non-negative whole number in ``name`` (one of ``THROUGHPUT_STEPS``), else its default."""
    text = (env.get(name) or "").strip()
    if not text:
        return THROUGHPUT_STEPS[name]
    if not text.isdigit():
        raise SettingsError(f"{name} must be a non-negative integer, got {text!r}")
    return int(text)
