"""What this process runs with on its device: precision and threads, logged as ``resolved_settings``.

Shared by the training run and the throughput mode so both resolve ``auto`` the same way: the kit's
precision rule (``workloads.common.precision``: bf16 where the GPU or CPU runs it natively, fp16 with
a GradScaler on 7.x GPUs, fp32 otherwise) and threads per process (``workloads.common.cpus``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from workloads.common import precision as rule
from workloads.common.cpus import threads_per_process, usable_cpus
from workloads.common.devices import device_facts
from workloads.common.distributed import Context
from workloads.common.errors import SettingsError
from workloads.llama31_8b.config import TrainConfig


@dataclass(frozen=True, kw_only=True)
class Setup:
    precision: str
    """'bf16', 'fp16' or 'fp32'."""
    settings: dict
    """The ``resolved_settings`` event's value."""
    device_name: str


def resolve_setup(config: TrainConfig, context: Context) -> Setup:
    """Precision and threads for this device; sets torch's threads (and TF32 matmuls on a GPU that has them)."""
    facts = device_facts(context.device)
    try:
        choice = rule.choose(config.precision, facts.kind, facts.capability, facts.cpu_bf16_native)
    except rule.PrecisionError as exc:
        raise SettingsError(f"precision={config.precision}: {exc}") from None
    threads = config.threads or threads_per_process(usable_cpus(), context.local_world_size)
    torch.set_num_threads(threads)
    if facts.kind == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
    settings = {
        "precision": choice.precision, "requested_precision": config.precision, "threads": threads,
        "nproc": context.local_world_size, "device": facts.kind, "device_name": facts.name,
        "capability": facts.capability_text, "channels_last": False, "compile": False, "why": choice.why,
        "parallelism": "fsdp2" if context.is_distributed else "none",
        "activation_checkpointing": config.checkpointing,
    }
    return Setup(precision=choice.precision, settings=settings, device_name=facts.name)
