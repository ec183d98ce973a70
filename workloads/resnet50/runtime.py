"""What this process runs with on its device: precision, threads, decoding; logged as ``resolved_settings``.

Shared by the training run (train.py) and the throughput mode (throughput.py), so both resolve
``auto`` the same way and log the same event.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from workloads.common.cpus import usable_cpus
from workloads.common.devices import device_facts
from workloads.common.distributed import Context
from workloads.resnet50.config import TrainConfig
from workloads.resnet50.engine import Precision
from workloads.resnet50.gpu_decode import torchvision_decoder
from workloads.resnet50.pipeline import DecodeChoice, choose_decoder, dali_installed
from workloads.resnet50.precision import resolve


@dataclass(frozen=True, kw_only=True)
class Setup:
    """What the run resolved on its device."""

    precision: Precision
    """Autocast dtype and memory format of the step."""
    decode: DecodeChoice
    """The input pipeline's decoding path."""
    settings: dict
    """The ``resolved_settings`` event's value (the conventions' fields, plus decode and decode_why)."""
    device_memory: int | None = None
    """The GPU's memory in bytes (None on a CPU)."""


def resolve_setup(config: TrainConfig, context: Context) -> Setup:
    """Precision, threads and decoding for this device; sets torch's threads and cudnn's autotuner."""
    facts = device_facts(context.device)
    resolved = resolve(config.precision, facts.kind, facts.capability, facts.cpu_bf16_native, usable_cpus(),
                       context.local_world_size, threads=config.threads)
    torch.set_num_threads(resolved.threads)
    if facts.kind == "cuda":
        torch.backends.cudnn.benchmark = True
    decoder = torchvision_decoder()
    choice = choose_decoder(config.decode, facts.kind, torchvision_ok=decoder is not None, dali_ok=dali_installed())
    decode_why = f"{choice.why} ({decoder.how})" if choice.name == "torchvision" and decoder else choice.why
    settings = {
        "precision": resolved.precision, "requested_precision": config.precision, "threads": resolved.threads,
        "nproc": context.local_world_size, "device": facts.kind, "device_name": facts.name,
        "capability": facts.capability_text,
        "channels_last": config.channels_last, "compile": config.compile, "why": resolved.why,
        "decode": choice.name, "decode_why": decode_why,
    }
    return Setup(precision=Precision(dtype=resolved.precision, channels_last=config.channels_last), decode=choice,
                 settings=settings, device_memory=facts.total_memory)
