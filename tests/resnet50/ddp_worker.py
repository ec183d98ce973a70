"""One rank of the two-process gloo tests in test_engine.py (run as a script, not collected).

Rank 1 gets a batch with no readable image at step 1 and, if asked, a non-finite input at step 3;
rank 0's batches are all fine. Each rank writes what its epoch did to OUT/rank<R>.json: steps,
unreadable images, divergence, a checksum of its weights, and the host-side collectives it called
during the epoch (all_reduce, broadcast, and DDP's buffer broadcast, ``_broadcast_coalesced``).
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn

from workloads.common import distributed
from workloads.resnet50.data_loader import DeviceBatch
from workloads.resnet50.engine import Precision, train_epoch, wrap
from workloads.resnet50.optim import Schedule, build_optimizer

STEPS = 6


def batches(rank: int, poison: bool) -> list[DeviceBatch]:
    generator = torch.Generator().manual_seed(rank)
    out = []
    for step in range(STEPS):
        if rank == 1 and step == 1:
            out.append(DeviceBatch(torch.empty(0, 3, 8, 8), torch.empty(0, dtype=torch.int64), 0, 4))
            continue
        images = torch.randn(4, 3, 8, 8, generator=generator)
        if poison and rank == 1 and step == 3:
            images[0, 0, 0, 0] = float("nan")
        out.append(DeviceBatch(images, torch.randint(0, 3, (4,), generator=generator), 4, 0))
    return out


def counting(calls: Counter) -> None:
    """Count the host-side collectives (what the gradient all-reduce of DDP's reducer is not)."""
    for name in ("all_reduce", "broadcast", "_broadcast_coalesced"):
        real = getattr(dist, name)

        def counted(*args, _real=real, _name=name, **kwargs):
            calls[_name] += 1
            return _real(*args, **kwargs)

        setattr(dist, name, counted)


def main(out: Path, poison: bool) -> None:
    with distributed.joined("cpu") as ctx:  # as the entry points do: the DDP model is gone before the group
        epoch(out, poison, ctx)


def epoch(out: Path, poison: bool, ctx: distributed.Context) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 3))
    optimizer = build_optimizer("lars", model, lr=0.1, momentum=0.9, weight_decay=5e-5, lars_eta=0.001,
                                lars_epsilon=0.0)
    network = wrap(model, ctx)
    precision = Precision(dtype="fp32", channels_last=False)
    calls: Counter = Counter()
    counting(calls)
    stats = train_epoch(network, batches(ctx.rank, poison), optimizer, nn.CrossEntropyLoss(),
                        Schedule(base_lr=0.1, end_lr=0.0001, warmup_steps=0, decay_steps=10), 0, precision,
                        precision.scaler(ctx.device), ctx, finite_check_steps=1 if poison else 50)
    counts = dict(calls)
    weights = sum(float(p.detach().double().sum()) for p in model.parameters())
    (out / f"rank{ctx.rank}.json").write_text(json.dumps({"steps": stats.steps, "skipped": stats.skipped,
                                                          "diverged": stats.diverged, "weights": weights,
                                                          "collectives": counts}))


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2] == "poison")
