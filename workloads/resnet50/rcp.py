"""The reference convergence points (RCPs) of MLPerf Training 4.0.0 for ResNet-50, and lookup by batch.

A closed-division ResNet run must use the hyperparameters of a point whose global batch size is the
run's own: the RCP checker compares the run's epochs to converge with that point's. The table is
``mlperf_logging/rcp_checker/training_4.0.0/rcps_resnet.json`` of mlperf-logging 4.1.68 (the
workload does not read the package's file: the GPU images it runs in need not carry it; a test
compares the two). All points use LARS with end rate 0.0001, decay power 2 and epsilon 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

IMAGENET_TRAIN_IMAGES = 1_281_167
"""Training images of ImageNet 2012; an RCP's decay steps count optimizer steps over this many."""


@dataclass(frozen=True, kw_only=True)
class RcpPoint:
    """One reference convergence point: a global batch size and its hyperparameters."""

    global_batch: int
    """Images per optimizer step over all processes."""
    base_lr: float
    """LARS base learning rate (``opt_base_learning_rate``)."""
    warmup_epochs: float
    """Epochs of linear warmup."""
    momentum: float
    """LARS momentum."""
    weight_decay: float
    """LARS weight decay."""
    decay_steps: int
    """Optimizer steps of polynomial decay after warmup (``opt_learning_rate_decay_steps``)."""
    bn_span: int
    """Images per BatchNorm of the reference run (``model_bn_span``; informative, not checked)."""

    @property
    def decay_epochs(self) -> float:
        """``decay_steps`` in epochs of ImageNet at this batch (rounds back to ``decay_steps``)."""
        return self.decay_steps * self.global_batch / IMAGENET_TRAIN_IMAGES


RULESET = "4.0.0"
"""The MLPerf Training ruleset the table belongs to."""

POINTS: tuple[RcpPoint, ...] = (
    RcpPoint(global_batch=1632, base_lr=7.4, warmup_epochs=2, momentum=0.9, weight_decay=5e-5,
             decay_steps=27476, bn_span=204),
    RcpPoint(global_batch=3264, base_lr=10.5, warmup_epochs=2, momentum=0.9, weight_decay=5e-5,
             decay_steps=14523, bn_span=204),
    RcpPoint(global_batch=4096, base_lr=10, warmup_epochs=5, momentum=0.9, weight_decay=2e-4,
             decay_steps=13137, bn_span=64),
    RcpPoint(global_batch=8192, base_lr=17, warmup_epochs=5, momentum=0.9, weight_decay=2e-4,
             decay_steps=6095, bn_span=64),
    RcpPoint(global_batch=13056, base_lr=12.8, warmup_epochs=9, momentum=0.9, weight_decay=2.5e-5,
             decay_steps=4710, bn_span=204),
    RcpPoint(global_batch=32768, base_lr=21.2, warmup_epochs=16, momentum=0.94, weight_decay=2.5e-5,
             decay_steps=2267, bn_span=128),
    RcpPoint(global_batch=49152, base_lr=19.405, warmup_epochs=24, momentum=0.951807, weight_decay=1e-4,
             decay_steps=1846, bn_span=256),
    RcpPoint(global_batch=58880, base_lr=23.246, warmup_epochs=29, momentum=0.951807, weight_decay=1e-4,
             decay_steps=1785, bn_span=230),
    RcpPoint(global_batch=65536, base_lr=24.699, warmup_epochs=31, momentum=0.951807, weight_decay=1e-4,
             decay_steps=1133, bn_span=128),
    RcpPoint(global_batch=67840, base_lr=24.699, warmup_epochs=31, momentum=0.951807, weight_decay=1e-4,
             decay_steps=1133, bn_span=424),
)


def find(global_batch: int) -> RcpPoint | None:
    """The point for exactly this global batch, or None."""
    return next((point for point in POINTS if point.global_batch == global_batch), None)


def nearest(global_batch: int) -> RcpPoint:
    """The point whose batch is closest on a log scale (hyperparameters for a batch without a point)."""
    return min(POINTS, key=lambda point: abs(math.log(point.global_batch / global_batch)))


def batches() -> str:
    """The batch sizes that have a point, for messages: '1632, 3264, ...'."""
    return ", ".join(str(point.global_batch) for point in POINTS)
