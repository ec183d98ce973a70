"""SGD with momentum whose buffers start at zero, whatever the first step does.

torch's fused SGD (``SGD(fused=True)``, what both workloads take on a GPU) creates the momentum
buffers of a first step with ``torch.empty_like`` (``_fused_sgd`` in torch/optim/sgd.py) and lets
the kernel fill them (``is_first_step``: buffer = gradient). Stepped by a GradScaler, the kernel
returns early when the scaled gradients overflowed, which is likely on the very first step at the
initial scale of 65536: the buffers stay as the allocator left that memory, are stored in the
optimizer state, and every later step reads them (momentum of 1e37 was seen on the CPU kernel).
Emptying the state again (a warm-up that restores the optimizer, a ``load_state_dict`` of a fresh
state) makes the next step a first step again.

Here a missing buffer is made of zeros before every step. With dampening 0 (the only value this
class takes) a zero buffer gives exactly the first step's update (momentum * 0 + gradient), so a
step that runs is unchanged and a skipped one leaves zeros; the fused kernel then never sees a
first step.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch


class ZeroMomentumSGD(torch.optim.SGD):
    """``torch.optim.SGD`` (dampening 0) whose momentum buffers are zeros until a step changes them."""

    def __init__(self, params: Iterable, *, lr: float, momentum: float, weight_decay: float = 0.0,
                 nesterov: bool = False, fused: bool | None = None, foreach: bool | None = None) -> None:
        super().__init__(params, lr=lr, momentum=momentum, weight_decay=weight_decay, nesterov=nesterov,
                         fused=fused, foreach=foreach)

    def zero_missing_momentum(self) -> None:
        """A zero buffer, shaped and laid out as its gradient (as torch's ``empty_like``), for every
        parameter about to be stepped that has none."""
        for group in self.param_groups:
            if group["momentum"] == 0:
                continue
            for param in group["params"]:
                if param.grad is None:
                    continue
                state = self.state[param]
                if state.get("momentum_buffer") is None:
                    state["momentum_buffer"] = torch.zeros_like(param.grad, memory_format=torch.preserve_format)

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:  # noqa: D102 (torch's)
        self.zero_missing_momentum()
        return super().step(closure)
