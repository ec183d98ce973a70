"""A fault injector at the boundary between a check and the device's kernels: while it is active, the
results of the matrix products (``aten.mm``) it is told to corrupt come back with the lowest bit of their
first value flipped, as a unit with silent data corruption would give them. Call numbers count from 1
in the order the products run; the same bit each time (a unit wrong the same way every time).

    with FlipBit(calls={2}):          # the second product of the run is wrong
        ...

As a stand-in probe (``FLIP_CALLS=2 python tests/qualify/flip_bit.py SEED``): the real probe, run with it."""

from __future__ import annotations

import os
import sys

import torch
from torch.utils._python_dispatch import TorchDispatchMode


class FlipBit(TorchDispatchMode):
    def __init__(self, calls: set[int]) -> None:
        super().__init__()
        self.calls, self.count = set(calls), 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001 - torch's signature
        out = func(*args, **(kwargs or {}))
        if func is torch.ops.aten.mm.default:
            self.count += 1
            if self.count in self.calls:
                out.view(-1)[:1].view(torch.int32).bitwise_xor_(1)
        return out


if __name__ == "__main__":
    from workloads.common.probe.__main__ import main

    with FlipBit({int(c) for c in os.environ["FLIP_CALLS"].split(",")}):
        sys.exit(main(sys.argv[1:]))
