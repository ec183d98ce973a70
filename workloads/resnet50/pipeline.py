"""Which input pipeline a run uses (PIL workers, nvJPEG through torchvision, or DALI), and building it.

``choose_decoder`` is a pure function of what is installed and where the model runs; the name it
returns is logged in ``resolved_settings`` as ``decode``.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterable, Sized
from dataclasses import dataclass
from typing import Protocol

from workloads.common.distributed import Context
from workloads.common.errors import SettingsError
from workloads.resnet50.config import TrainConfig
from workloads.resnet50.data_loader import (
    DeviceBatch,
    EvalTransform,
    HostPipeline,
    ImageFolder,
    Normalizer,
    ShardSampler,
    TrainTransform,
    make_loader,
)
from workloads.resnet50.gpu_decode import (
    DevicePipeline,
    EncodedFolder,
    EvalAugment,
    TrainAugment,
    collate_encoded,
    stderr_line,
    torchvision_decoder,
)
from workloads.resnet50.layout import Split


class InputPipeline(Iterable[DeviceBatch], Sized, Protocol):
    name: str

    def set_epoch(self, epoch: int) -> None: ...


@dataclass(frozen=True, kw_only=True)
class DecodeChoice:
    """The decoding path and why."""

    name: str
    """'pil', 'torchvision' or 'dali'."""
    why: str
    """One sentence."""


def dali_installed() -> bool:
    try:
        return importlib.util.find_spec("nvidia.dali") is not None
    except (ImportError, ValueError):
        return False


def choose_decoder(requested: str, device_kind: str, *, torchvision_ok: bool, dali_ok: bool) -> DecodeChoice:
    """'auto' takes nvJPEG through torchvision on a GPU when torchvision imports, else PIL; a forced
    path that cannot run here is a SettingsError."""
    if requested == "pil":
        return DecodeChoice(name="pil", why="decode=pil asked for")
    if requested == "torchvision":
        if not torchvision_ok:
            raise SettingsError("decode=torchvision but torchvision cannot be imported (use decode=auto or pil)")
        return DecodeChoice(name="torchvision", why="decode=torchvision asked for")
    if requested == "dali":
        raise SettingsError("decode=dali is not implemented by this workload yet (use decode=auto, torchvision "
                            "or pil)" if dali_ok else "decode=dali but NVIDIA DALI is not installed")
    if device_kind != "cuda":
        return DecodeChoice(name="pil", why="auto on the CPU: PIL in loader workers")
    if torchvision_ok:
        return DecodeChoice(name="torchvision", why="auto on a GPU: nvJPEG through torchvision")
    return DecodeChoice(name="pil", why="auto on a GPU without an importable torchvision: PIL in loader workers")


def build_pipelines(config: TrainConfig, choice: DecodeChoice, train_split: Split, val_split: Split, ctx: Context,
                    seed: int) -> tuple[InputPipeline, InputPipeline]:
    """(training, evaluation) pipelines of this rank."""
    pin = ctx.device.type == "cuda"
    normalizer = Normalizer(ctx.device, channels_last=config.channels_last)
    train_sampler = ShardSampler(len(train_split.samples), rank=ctx.rank, world=ctx.world_size, shuffle=True,
                                 seed=seed, batch_size=config.batch_size, drop_last=True)
    val_sampler = ShardSampler(len(val_split.samples), rank=ctx.rank, world=ctx.world_size, shuffle=False,
                               seed=seed, batch_size=config.eval_batch_size, drop_last=False)
    worker_seed = seed * 7919 + ctx.rank
    if choice.name == "pil":
        train_loader = make_loader(ImageFolder(train_split.samples, TrainTransform(crop=config.crop)), train_sampler,
                                   batch_size=config.batch_size, workers=config.workers, seed=worker_seed,
                                   pin_memory=pin)
        val_loader = make_loader(ImageFolder(val_split.samples, EvalTransform(resize=config.eval_resize,
                                                                              crop=config.crop)),
                                 val_sampler, batch_size=config.eval_batch_size, workers=config.workers,
                                 seed=worker_seed, pin_memory=pin)
        return (HostPipeline(train_loader, train_sampler, normalizer, ctx.device, crop=config.crop),
                HostPipeline(val_loader, val_sampler, normalizer, ctx.device, crop=config.crop))
    decoder = torchvision_decoder()
    if decoder is None:
        raise SettingsError("decode=torchvision but torchvision cannot be imported (use decode=auto or pil)")
    report = rank_line(ctx)
    train_loader = make_loader(EncodedFolder(train_split.samples), train_sampler, batch_size=config.batch_size,
                               workers=config.workers, seed=worker_seed, pin_memory=pin, collate=collate_encoded)
    val_loader = make_loader(EncodedFolder(val_split.samples), val_sampler, batch_size=config.eval_batch_size,
                             workers=config.workers, seed=worker_seed, pin_memory=pin, collate=collate_encoded)
    return (DevicePipeline(train_loader, train_sampler, decoder, TrainAugment(crop=config.crop), normalizer,
                           ctx.device, seed=worker_seed, report=report, summarise=ctx.is_main),
            DevicePipeline(val_loader, val_sampler, decoder, EvalAugment(resize=config.eval_resize, crop=config.crop),
                           normalizer, ctx.device, seed=worker_seed, report=report, summarise=ctx.is_main))


def rank_line(ctx: Context) -> Callable[[str], None]:
    """stderr lines of this rank's pipeline (named by rank when there are several)."""
    if not ctx.is_distributed:
        return stderr_line
    return lambda message: stderr_line(f"rank {ctx.rank}: {message}")

