"""Whether the per-GPU batch fits the GPU's memory, said at start-up rather than by an OOM an hour in.

The closed preset trains 408 images per GPU (the MLPerf reference's 8 x 408 = 3264); a 16 GB card
(V100-16GB, T4) cannot hold that. The estimate, per training process, is a lower bound (a batch is
refused only when even that exceeds the card):

- activations kept for the backward pass, per image: measured for ResNet-50 v1.5 at 224 x 224 in
  channels_last, with every tensor autograd saves counted once by storage
  (``torch.autograd.graph.saved_tensors_hooks``, torch 2.13, CPU, parameters excluded): 82.0 MiB
  in fp32 and 54.0 MiB under 16-bit autocast (52.4 MiB of bf16 tensors, 1.5 MiB of max-pool
  indices, 0.1 MiB of fp32). fp16 saves the same tensors as bf16 at the same width. Scaled by the
  crop's area and the network's width (64 for ResNet-50) for other shapes, an approximation;
- plus the model's state: 25.6 M parameters as fp32 weights, gradients and momentum, and the
  autocast's 16-bit copy of the weights (14 bytes each);
- plus 1 GiB for the CUDA context, cuDNN's workspace and the input batches.

That puts 408 images in fp16 at 22.8 GiB, against 15.8 GiB on a V100-16GB and 14.6 GiB on a
T4. The suggested batch leaves 10% more per image for what the backward pass holds besides the
saved activations (the gradient being back-propagated, cuDNN's choice of algorithm, the caching
allocator's rounding): the largest such batch, preferring one whose global batch has an RCP (the
run can then stay closed). ``memory_check=false`` skips the check.
"""

from __future__ import annotations

import math

from workloads.common.errors import SettingsError
from workloads.resnet50 import rcp
from workloads.resnet50.config import TrainConfig

MIB = 2**20
GIB = 2**30
REFERENCE_CROP = 224
REFERENCE_WIDTH = 64
SAVED_PER_IMAGE = {"fp32": 82.0 * MIB, "bf16": 54.0 * MIB, "fp16": 54.0 * MIB}
"""Activation bytes autograd keeps per image at 224 x 224, ResNet-50 (measured: see the module's doc)."""
HEADROOM = 1.1
"""Per-image memory a suggested batch allows for: the saved activations and what the backward pass
holds besides them (a tenth more)."""
PARAMETERS = 25_557_032
"""ResNet-50 v1.5 with 1000 classes."""
STATE_BYTES_PER_PARAMETER = 14
"""fp32 weight, gradient and momentum, and autocast's 16-bit copy."""
RESERVED = 1 * GIB
"""CUDA context, cuDNN workspace, input batches."""
BATCH_STEP = 8
"""Suggested batches are multiples of this (when no RCP batch fits)."""


def per_image(config: TrainConfig, precision: str) -> float:
    """Bytes of activations autograd keeps per training image in ``precision``."""
    scale = (config.crop / REFERENCE_CROP) ** 2 * (config.width / REFERENCE_WIDTH)
    return SAVED_PER_IMAGE[precision] * scale


def fixed(config: TrainConfig) -> float:
    """Bytes that do not grow with the batch: the model's state and the reserve."""
    return PARAMETERS * (config.width / REFERENCE_WIDTH) ** 2 * STATE_BYTES_PER_PARAMETER + RESERVED


def estimate(config: TrainConfig, precision: str, batch: int) -> float:
    """Bytes of GPU memory one process needs at least to train ``batch`` images per step."""
    return fixed(config) + batch * per_image(config, precision)


def largest_batch(config: TrainConfig, precision: str, total_memory: int) -> int:
    """The largest per-process batch that fits ``total_memory`` with HEADROOM per image (0: none does)."""
    return max(0, math.floor((total_memory - fixed(config)) / (per_image(config, precision) * HEADROOM)))


def suggestion(config: TrainConfig, precision: str, total_memory: int, processes: int) -> tuple[int, str]:
    """(batch to set, why that one): the largest fitting batch whose global batch has an RCP, else the
    largest fitting multiple of BATCH_STEP."""
    most = largest_batch(config, precision, total_memory)
    with_rcp = [point.global_batch // processes for point in rcp.POINTS
                if point.global_batch % processes == 0 and 0 < point.global_batch // processes <= most]
    if with_rcp:
        batch = max(with_rcp)
        return batch, f"global batch {batch * processes} has an RCP, so the run can stay closed"
    batch = max(1, most // BATCH_STEP * BATCH_STEP) if most >= BATCH_STEP else max(1, most)
    return batch, f"the largest multiple of {BATCH_STEP} that fits; no global batch with an RCP fits, so it is open"


def fits_or_raise(config: TrainConfig, precision: str, *, total_memory: int | None, device_name: str,
                  processes: int) -> None:
    """SettingsError (one line: what to set) when ``config.batch_size`` will not fit ``total_memory``
    bytes (None: not a GPU, nothing to check)."""
    if total_memory is None or not config.memory_check:
        return
    need = estimate(config, precision, config.batch_size)
    if need <= total_memory:
        return
    batch, why = suggestion(config, precision, total_memory, processes)
    raise SettingsError(
        f"batch_size={config.batch_size} will not fit: {device_name} has {total_memory / GIB:.1f} GiB and ResNet-50 "
        f"at {config.crop}x{config.crop} in {precision} needs at least {need / GIB:.1f} GiB per GPU "
        f"({per_image(config, precision) / MIB:.0f} MiB per image, see workloads/resnet50/memory.py); set "
        f'RESNET50_SET="batch_size={batch}" ({why}), or memory_check=false to try anyway')
