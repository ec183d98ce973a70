"""Convolution: ResNet-50's 2D stages and the closed unet3d's 3D layers, forward, in each dtype
the device runs natively (cuDNN picks its fastest algorithm on a GPU).

    spec: {"dtypes": ["fp32", "bf16"], "conv2d": [[N, C, H=W, K, kernel, stride, padding], ...],
           "conv3d": [[N, C, D=H=W, K, kernel, stride, padding], ...]}

Sanity: sampled outputs of the first image against float64 on the CPU, each computed from its own
input patch (an independent path: not the kernel being timed), within a tolerance per dtype.
Performance: TFLOP/s (2 x outputs x C x kernel volume).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

import torch

from workloads.common.probe import dtypes
from workloads.common.probe.harness import Case, Context, median
from workloads.common.probe.protocol import Outcome, Performance, Sanity
from workloads.common.probe.sanity import close

DECLARATION = {
    "name": "conv",
    "kind": "microbenchmark",
    "needs": {"device": "any", "gpus": 0, "data": False},
    "sanity": "sampled outputs of the first image against float64 on the CPU, each computed from its own input"
              " patch, within a tolerance per dtype",
    "units": {"conv2d_fp32_*": "TFLOP/s", "conv2d_tf32_*": "TFLOP/s", "conv2d_fp16_*": "TFLOP/s",
              "conv2d_bf16_*": "TFLOP/s", "conv3d_fp32_*": "TFLOP/s", "conv3d_tf32_*": "TFLOP/s",
              "conv3d_fp16_*": "TFLOP/s", "conv3d_bf16_*": "TFLOP/s"},
    "sane": {"conv2d_*": [0, 1e5], "conv3d_*": [0, 1e5]},
    "timeout_s": 900,
    "repeat": True,
    "device_bound": True,
    "remedy": {"wrong": "replace", "slow": "investigate"},
    "settings": {
        "dtypes": {"type": "choices", "of": ["fp32", "tf32", "fp16", "bf16"], "default": ["fp32"],
                   "doc": "each is timed where the device supports it natively"},
        "conv2d": {"type": "rows", "default": [],
                   "row": [{"type": "int", "min": 1}, {"type": "int", "min": 1}, {"type": "int", "min": 1},
                           {"type": "int", "min": 1}, {"type": "int", "min": 1}, {"type": "int", "min": 1},
                           {"type": "int", "min": 0}],
                   "doc": "(N, C, H=W, K, kernel, stride, padding)"},
        "conv3d": {"type": "rows", "default": [],
                   "row": [{"type": "int", "min": 1}, {"type": "int", "min": 1}, {"type": "int", "min": 1},
                           {"type": "int", "min": 1}, {"type": "int", "min": 1}, {"type": "int", "min": 1},
                           {"type": "int", "min": 0}],
                   "doc": "(N, C, D=H=W, K, kernel, stride, padding): unet3d's layers"},
    },
}
CHECK = DECLARATION["name"]
CHECKED_POINTS = 64
"""Outputs of the first image compared with float64 (the whole reference would take seconds a case
on a CPU, longer than the case)."""
TOLERANCE = {"fp32": 1e-3, "tf32": 2e-2, "bf16": 5e-2, "fp16": 2e-2}
"""Largest error relative to the largest checked output; fp32 allows for cuDNN's FFT and Winograd
algorithms, which round differently from a direct convolution."""


def cases(spec: dict[str, Any], context: Context) -> Iterator[Case]:
    for name in spec["dtypes"]:
        dtype, why = dtypes.native(context.device, name)
        for dims in (2, 3):
            for shape in spec[f"conv{dims}d"]:
                n, c, size, k, kernel, stride, _ = shape
                metric = f"conv{dims}d_{name}_n{n}c{c}s{size}k{k}r{kernel}u{stride}"
                if dtype is None:
                    yield Case(check=CHECK, metric=metric, skip=str(why))
                else:
                    yield Case(check=CHECK, metric=metric,
                               measure=functools.partial(measure, context, dims, name, dtype, tuple(shape)))


def measure(context: Context, dims: int, name: str, dtype: torch.dtype, shape: tuple[int, ...]) -> Outcome:
    """``shape``: N, C, spatial size, K (output channels), kernel size, stride, padding."""
    n, c, size, k, kernel, stride, pad = shape
    device = context.device.main
    if context.device.cuda:
        torch.backends.cudnn.benchmark = True
    layer_cls = torch.nn.Conv2d if dims == 2 else torch.nn.Conv3d
    layer = layer_cls(c, k, kernel, stride=stride, padding=pad, bias=False).to(device, dtype)
    x = torch.randn(n, c, *([size] * dims), device=device, dtype=dtype)  # (N, C, [D,] H, W)
    with dtypes.tf32(context.device, torch.backends.cudnn, name), torch.no_grad():
        out = layer(x)  # (N, K, [D',] H', W')
        times = context.time(lambda: layer(x))
    seconds, words = median(times)
    flops = 2.0 * out.numel() * c * kernel ** dims
    sanity = conv_sanity(x, layer.weight.detach(), out, stride, pad, TOLERANCE.get(name, 1e-2), context.seed)
    return Outcome(sanity=sanity, performance=Performance(value=flops / seconds / 1e12, unit="TFLOP/s",
                                                          detail=f"output {tuple(out.shape)}; {words}"))


def conv_sanity(x: torch.Tensor, weight: torch.Tensor, out: torch.Tensor, stride: int, padding: int,
                tolerance: float, seed: int = 0) -> Sanity:
    """``out`` is the convolution of ``x`` by ``weight`` (no bias): ``CHECKED_POINTS`` outputs of the
    first image, the first and the last among them, against float64."""
    points = sample_points(tuple(out.shape[1:]), CHECKED_POINTS, seed)
    expect = torch.tensor([reference_point(x[0], weight, stride, padding, p) for p in points], dtype=torch.float64)
    index = torch.tensor(points, device=out.device).T  # (1 + dims, P)
    return close(out[0][tuple(index)], expect, tolerance)


def sample_points(shape: tuple[int, ...], count: int, seed: int) -> list[tuple[int, ...]]:
    """``count`` positions (channel, spatial...) in an output image of ``shape``: its first and last,
    the others drawn with ``seed``."""
    total = 1
    for extent in shape:
        total *= extent
    generator = torch.Generator().manual_seed(seed)
    flat = [0, total - 1, *torch.randint(0, total, (max(count - 2, 0),), generator=generator).tolist()]
    points = []
    for index in flat:
        position = []
        for extent in reversed(shape):
            index, at = divmod(index, extent)
            position.append(at)
        points.append(tuple(reversed(position)))
    return points


def reference_point(image: torch.Tensor, weight: torch.Tensor, stride: int, padding: int,
                    point: tuple[int, ...]) -> float:
    """One output of the convolution, in float64 on the CPU: the input patch under output channel
    ``point[0]``'s kernel at spatial position ``point[1:]`` (zeros outside the image: the padding)."""
    channel, *position = point
    kernel = weight.shape[2:]  # (kernel,) * dims
    patch = torch.zeros((image.shape[0], *kernel), dtype=torch.float64)  # (C, kernel...)
    source, target = [slice(None)], [slice(None)]
    for at, extent, size in zip(position, kernel, image.shape[1:], strict=True):
        start = at * stride - padding
        low, high = max(start, 0), min(start + extent, size)
        source.append(slice(low, max(high, low)))
        target.append(slice(low - start, max(high, low) - start))
    patch[tuple(target)] = image[tuple(source)].double().cpu()
    return float((patch * weight[channel].double().cpu()).sum())
