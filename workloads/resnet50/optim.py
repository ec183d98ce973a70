"""Optimizers and learning-rate schedule of the MLPerf ResNet benchmark.

- SGD with momentum, or LARS (layer-wise adaptive rate scaling, You et al. 2017) as in the MLPerf
  reference: for a weight w with gradient g, trust = eta * |w| / (|g| + wd * |w| + epsilon), then
  v = momentum * v + lr * trust * (g + wd * w), w = w - v. BatchNorm parameters and biases are
  excluded from both the adaptation and the weight decay. The step is vectorised over a group's
  tensors with ``torch._foreach_*`` ops (a few kernels per group, not a few per tensor) and reads
  nothing back to the host; under fp16 it unscales and skips on overflow itself on the device
  (``_step_supports_amp_scaling``), so GradScaler need not wait for the device either.
- SGD is ``torch.optim.SGD``, fused on CUDA, foreach elsewhere, with momentum buffers that start at
  zero (``workloads.common.sgd``: a first step skipped by the GradScaler leaves no uninitialised memory).
- Schedule per step: linear warmup to the base rate over the warmup epochs, then polynomial decay
  (power 2) to the end rate over ``decay_steps``, then the end rate.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import torch
from torch import nn

from workloads.common.sgd import ZeroMomentumSGD


@dataclass(frozen=True, kw_only=True)
class Schedule:
    """Warmup then polynomial decay, per optimizer step."""

    base_lr: float
    """Rate at the end of warmup."""
    end_lr: float
    """Rate once the decay is over (0.0001 in the closed rules)."""
    warmup_steps: int
    """Steps of linear warmup from base_lr / warmup_steps to base_lr."""
    decay_steps: int
    """Steps of polynomial decay after warmup."""
    power: float = 2.0
    """Exponent of the polynomial decay (2 in the closed rules)."""

    def __post_init__(self) -> None:
        if self.base_lr <= 0 or self.end_lr < 0 or self.end_lr > self.base_lr:
            raise ValueError(f"need 0 <= end_lr <= base_lr and base_lr > 0, got {self.base_lr}, {self.end_lr}")
        if self.warmup_steps < 0 or self.decay_steps < 1:
            raise ValueError(f"need warmup_steps >= 0, decay_steps >= 1, got {self.warmup_steps}, {self.decay_steps}")

    def lr(self, step: int) -> float:
        """Rate for optimizer step ``step`` (0-based)."""
        if step < self.warmup_steps:
            return self.base_lr * (step + 1) / self.warmup_steps
        progress = min(step - self.warmup_steps, self.decay_steps) / self.decay_steps
        return (self.base_lr - self.end_lr) * (1.0 - progress) ** self.power + self.end_lr


def parameter_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """Weights of convolutions and the classifier get weight decay and LARS; BN and biases do not."""
    decayed, plain = [], []
    for parameter in model.parameters():
        if parameter.requires_grad:
            (decayed if parameter.ndim > 1 else plain).append(parameter)
    return [
        {"params": decayed, "weight_decay": weight_decay, "adapt": True},
        {"params": plain, "weight_decay": 0.0, "adapt": False},
    ]


class LARS(torch.optim.Optimizer):
    """LARS with momentum; a group with ``adapt=False`` is plain momentum SGD without weight decay."""

    _step_supports_amp_scaling = True
    """GradScaler sets ``grad_scale`` and ``found_inf`` on the optimizer instead of syncing to skip."""

    def __init__(self, params: Iterable, *, lr: float, momentum: float, weight_decay: float,
                 eta: float = 0.001, epsilon: float = 0.0) -> None:
        if lr < 0 or not 0 <= momentum < 1 or weight_decay < 0 or eta <= 0 or epsilon < 0:
            raise ValueError("LARS: need lr >= 0, 0 <= momentum < 1, weight_decay >= 0, eta > 0, epsilon >= 0")
        defaults = {"lr": lr, "momentum": momentum, "weight_decay": weight_decay, "eta": eta,
                    "epsilon": epsilon, "adapt": True}
        super().__init__(params, defaults)

    def _velocities(self, weights: list[torch.Tensor]) -> list[torch.Tensor]:
        out = []
        for weight in weights:
            state = self.state[weight]
            if "velocity" not in state:
                state["velocity"] = torch.zeros_like(weight)
            out.append(state["velocity"])
        return out

    @staticmethod
    def _adapted(weights: list[torch.Tensor], grads: list[torch.Tensor], decay: float, eta: float,
                 epsilon: float) -> list[torch.Tensor]:
        """trust * (g + wd * w) per tensor, trust = eta |w| / (|g| + wd |w| + epsilon) (1 where a norm is 0)."""
        w_norm = torch.stack(torch._foreach_norm(weights))
        g_norm = torch.stack(torch._foreach_norm(grads))
        trust = eta * w_norm / (g_norm + decay * w_norm + epsilon)
        trust = torch.where((w_norm > 0) & (g_norm > 0), trust, torch.ones_like(trust))
        updates = torch._foreach_add(grads, weights, alpha=decay)
        torch._foreach_mul_(updates, list(trust.unbind(0)))
        return updates

    @torch.no_grad()
    def step(self, closure=None):  # noqa: D102 (torch signature)
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        grad_scale: torch.Tensor | None = getattr(self, "grad_scale", None)
        found_inf: torch.Tensor | None = getattr(self, "found_inf", None)
        for group in self.param_groups:
            weights = [w for w in group["params"] if w.grad is not None]
            if not weights:
                continue
            grads = [w.grad for w in weights]
            if grad_scale is not None:
                grads = torch._foreach_div(grads, grad_scale)
            if group["adapt"]:
                updates = self._adapted(weights, grads, group["weight_decay"], group["eta"], group["epsilon"])
            else:
                updates = grads
            velocities = self._velocities(weights)
            if found_inf is None:
                torch._foreach_mul_(velocities, group["momentum"])
                torch._foreach_add_(velocities, updates, alpha=group["lr"])
                torch._foreach_sub_(weights, velocities)
                continue
            # fp16: keep weights and velocities where the scaled gradients overflowed (GradScaler skips)
            new_velocities = torch._foreach_mul(velocities, group["momentum"])
            torch._foreach_add_(new_velocities, updates, alpha=group["lr"])
            new_weights = torch._foreach_sub(weights, new_velocities)
            skip = found_inf.bool()
            for old, new in zip(velocities + weights, new_velocities + new_weights, strict=True):
                old.copy_(torch.where(skip, old, new))
        return loss


def build_optimizer(name: str, model: nn.Module, *, lr: float, momentum: float, weight_decay: float,
                    lars_eta: float, lars_epsilon: float) -> torch.optim.Optimizer:
    """LARS or SGD over ``model``'s parameters (fused SGD when they live on a GPU)."""
    groups = parameter_groups(model, weight_decay)
    if name == "lars":
        return LARS(groups, lr=lr, momentum=momentum, weight_decay=weight_decay, eta=lars_eta, epsilon=lars_epsilon)
    if name == "sgd":
        for group in groups:
            group.pop("adapt")
        on_gpu = next(model.parameters()).is_cuda
        return ZeroMomentumSGD(groups, lr=lr, momentum=momentum, weight_decay=weight_decay,
                               fused=True if on_gpu else None, foreach=None if on_gpu else True)
    raise ValueError(f"unknown optimizer {name!r} (sgd or lars)")


def set_lr(optimizer: torch.optim.Optimizer, lr: float) -> None:
    for group in optimizer.param_groups:
        group["lr"] = lr
