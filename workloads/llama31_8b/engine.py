"""One optimizer step and one evaluation of the Llama model, on one process or sharded over many.

Parallelism: PyTorch's FSDP2 (``torch.distributed.fsdp.fully_shard``) over every process of the
node, each decoder block its own unit and the model the root (gloo on a CPU, NCCL on GPUs); one
process runs the plain module. Every process takes its share of the global batch in micro-batches
of ``micro_batch``; gradients are averaged over the micro-batches here and over the processes by
FSDP's reduce-scatter, so a step is the same whatever the process count (a test holds 2 ranks to
1). Gradients synchronise on the last micro-batch only.

Precision: parameters, gradients and AdamW's state in fp32; the forward and backward under
autocast in bf16 or fp16 (a GradScaler for fp16) as ``precision`` resolved; the loss in fp32.
The reference (NeMo's MegatronMixedPrecision) keeps bf16 parameters and runs fp8 "hybrid" GEMMs
through Transformer Engine; the closed rules leave the precision to the submitter, and this
workload logs what it used (``lowest_numerical_precision_in_*``).

The optimizer: AdamW with weight decay on the matrices and embeddings, none on the norms (Megatron's
rule: no decay for 1-D parameters); the learning rate linear from 0 over the warmup, then a cosine
to ``end_lr`` over ``max_steps - warmup`` steps (NeMo's CosineAnnealing); gradients clipped to a
global norm of ``clip``.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from workloads.common import distributed
from workloads.common.distributed import Context
from workloads.llama31_8b.config import TrainConfig
from workloads.llama31_8b.model import Llama, loss_of

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


@dataclass(frozen=True, kw_only=True)
class Schedule:
    base_lr: float
    end_lr: float
    warmup_steps: int
    decay_steps: int

    def lr(self, step: int) -> float:
        """The learning rate of optimizer step ``step`` (0-based)."""
        if step < self.warmup_steps:
            return self.base_lr * (step + 1) / self.warmup_steps
        progress = min(1.0, (step - self.warmup_steps) / max(1, self.decay_steps))
        return self.end_lr + (self.base_lr - self.end_lr) * 0.5 * (1 + math.cos(math.pi * progress))


def schedule_of(config: TrainConfig) -> Schedule:
    return Schedule(base_lr=config.base_lr, end_lr=config.end_lr, warmup_steps=config.warmup_steps,
                    decay_steps=config.max_steps - config.warmup_steps)


def shard(model: Llama, context: Context) -> nn.Module:
    """FSDP2 over the node's processes (each block a unit, then the root); the model itself alone."""
    if not context.is_distributed:
        return model
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh(context.device.type, (context.world_size,))
    for block in model.layers:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model


def build(config: TrainConfig, context: Context) -> tuple[nn.Module, torch.optim.Optimizer]:
    """The model (initialised from torch's seed, the same on every process), sharded, and its AdamW.
    Its parameters are made on the process's device: 8 processes of the 8B model built on the host
    first would hold 8 x 32 GB of fp32 weights in host memory at once."""
    with context.device:
        model = Llama(config.shape, checkpointing=config.checkpointing)
    model = shard(model, context)
    decay = [p for p in model.parameters() if p.ndim >= 2]
    rest = [p for p in model.parameters() if p.ndim < 2]
    fused = {"fused": True} if context.device.type == "cuda" and not context.is_distributed else {}
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": config.weight_decay},
                                   {"params": rest, "weight_decay": 0.0}], lr=config.base_lr,
                                  betas=(config.beta1, config.beta2), eps=config.eps, **fused)
    return model, optimizer


def scaler_for(precision: str, context: Context) -> torch.amp.GradScaler | None:
    """A GradScaler for fp16 (FSDP's sharded one over many processes), None otherwise."""
    if precision != "fp16":
        return None
    if context.is_distributed:
        from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler

        return ShardedGradScaler(context.device.type)
    return torch.amp.GradScaler(context.device.type)


def autocast(precision: str, device: torch.device) -> contextlib.AbstractContextManager:
    if precision == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=DTYPES[precision])


def _sync(model: nn.Module, on: bool) -> None:
    setter = getattr(model, "set_requires_gradient_sync", None)
    if setter is not None:
        setter(on)


def _norm_value(norm: torch.Tensor) -> torch.Tensor:
    full = getattr(norm, "full_tensor", None)
    return full() if full is not None else norm


@dataclass(frozen=True)
class StepResult:
    loss: torch.Tensor
    """Mean training loss of this process's share (a device tensor: reading it waits for the device)."""
    grad_norm: torch.Tensor
    """Global gradient norm before clipping."""


def train_step(model: nn.Module, optimizer: torch.optim.Optimizer, batch: torch.Tensor, *, lr: float,
               config: TrainConfig, precision: str, scaler: torch.amp.GradScaler | None) -> StepResult:
    """One optimizer step over ``batch`` (this process's share: (share, seq_len + 1) token ids on the device)."""
    for group in optimizer.param_groups:
        group["lr"] = lr
    chunks = batch.split(config.micro_batch)
    total = torch.zeros((), device=batch.device)
    for index, chunk in enumerate(chunks):
        _sync(model, index == len(chunks) - 1)
        with autocast(precision, batch.device):
            logits = model(chunk[:, :-1])
        loss = loss_of(logits, chunk[:, 1:]) / len(chunks)
        (scaler.scale(loss) if scaler else loss).backward()
        total += loss.detach()
    if scaler:
        scaler.unscale_(optimizer)
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), config.clip)
    if scaler:
        scaler.step(optimizer)
        scaler.update()
    else:
        optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return StepResult(loss=total, grad_norm=_norm_value(norm))


@torch.no_grad()
def evaluate(model: nn.Module, samples, *, config: TrainConfig, precision: str, context: Context) -> float:
    """Mean next-token loss (log perplexity) over the first ``eval_samples`` validation samples, each
    process a contiguous share of ceil(eval_samples / processes). Every process runs as many forwards
    (FSDP gathers the weights in each): a share that runs short is filled with sample 0, weighted 0."""
    share = -(-config.eval_samples // context.world_size)
    first = context.rank * share
    model.eval()
    sums = torch.zeros(2, dtype=torch.float64, device=context.device)
    for start in range(first, first + share, config.micro_batch):
        indices = range(start, min(start + config.micro_batch, first + share))
        rows = [torch.from_numpy(samples[i if i < config.eval_samples else 0]) for i in indices]
        chunk = torch.stack(rows).to(context.device, non_blocking=True)
        with autocast(precision, context.device):
            logits = model(chunk[:, :-1])
        losses = F.cross_entropy(logits.float().transpose(1, 2), chunk[:, 1:], reduction="none")
        counted = sum(1 for i in indices if i < config.eval_samples)
        sums[0] += losses[:counted].double().sum()
        sums[1] += losses[:counted].numel()
    model.train()
    total = distributed.all_reduce_sum(sums, context)
    return float(total[0] / total[1])
