"""GEMM: DeepBench's training GEMMs, dense in each dtype the device runs natively and sparse (fp32
CSR, the one sparse kernel every device has).

    spec: {"dtypes": ["fp32", "bf16"], "dense": [[M, N, K], ...], "sparse": [[M, N, K, sparsity], ...]}

Sanity: the first rows of the product against float64 on the CPU, within a tolerance per dtype
(silent data corruption fails here). Performance: TFLOP/s dense, GFLOP/s sparse (non-zeros only).
On two or more GPUs the largest dense GEMM of each dtype runs on every GPU (``_gpu<i>``).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

import torch

from workloads.common.probe import dtypes
from workloads.common.probe.harness import Case, Context, median, per_gpu
from workloads.common.probe.protocol import Outcome, Performance, Sanity
from workloads.common.probe.sanity import close

DECLARATION = {
    "name": "gemm",
    "kind": "microbenchmark",
    "needs": {"device": "any", "gpus": 0, "data": False},
    "sanity": "the first rows of each product against float64 on the CPU, within a tolerance per dtype: a wrong"
              " product (silent data corruption) fails whatever its speed",
    "units": {"gemm_fp32_*": "TFLOP/s", "gemm_tf32_*": "TFLOP/s", "gemm_fp16_*": "TFLOP/s", "gemm_bf16_*": "TFLOP/s",
              "spmm_fp32_*": "GFLOP/s"},
    "sane": {"gemm_*": [0, 1e5], "spmm_*": [0, 1e8]},
    "timeout_s": 900,
    "repeat": True,
    "device_bound": True,
    "remedy": {"wrong": "replace", "slow": "investigate"},
    "settings": {
        "dtypes": {"type": "choices", "of": ["fp32", "tf32", "fp16", "bf16"], "default": ["fp32"],
                   "doc": "each is timed where the device supports it natively, and reported not applicable elsewhere"},
        "dense": {"type": "rows", "default": [],
                  "row": [{"type": "int", "min": 1}, {"type": "int", "min": 1}, {"type": "int", "min": 1}],
                  "doc": "(M, N, K) of the DeepBench training GEMMs"},
        "sparse": {"type": "rows", "default": [],
                   "row": [{"type": "int", "min": 1}, {"type": "int", "min": 1}, {"type": "int", "min": 1},
                           {"type": "float", "min": 0, "below": 1}],
                   "doc": "(M, N, K, sparsity) of DeepBench's sparse GEMMs (fp32, CSR)"},
    },
}
CHECK = DECLARATION["name"]
CHECKED_ROWS = 8
"""Rows of the product compared with float64 (the whole product would cost the GEMM again on a CPU)."""
TOLERANCE = {"fp32": 1e-4, "tf32": 2e-2, "bf16": 5e-2, "fp16": 2e-2}
"""Largest error relative to the largest product entry, per dtype (inputs rounded to it already)."""
SPARSE_TOLERANCE = 1e-4


def cases(spec: dict[str, Any], context: Context) -> Iterator[Case]:
    dense = [tuple(shape) for shape in spec["dense"]]
    largest = max(dense, key=lambda s: s[0] * s[1] * s[2], default=None)  # per GPU: the one near peak
    for name in spec["dtypes"]:
        dtype, why = dtypes.native(context.device, name)
        for m, n, k in dense:
            metric = f"gemm_{name}_{m}x{n}x{k}"
            if dtype is None:
                yield Case(check=CHECK, metric=metric, skip=str(why))
                continue
            for gpu in context.device.placements((m, n, k) == largest):
                yield Case(check=CHECK, metric=per_gpu(metric, gpu), gpu=gpu,
                           measure=functools.partial(measure_dense, context, name, dtype, (m, n, k), gpu))
    for m, n, k, sparsity in spec["sparse"]:
        yield Case(check=CHECK, metric=f"spmm_fp32_{m}x{n}x{k}_s{sparsity:g}",
                   measure=functools.partial(measure_sparse, context, (m, n, k), sparsity))


def measure_dense(context: Context, name: str, dtype: torch.dtype, shape: tuple[int, int, int],
                  gpu: int | None) -> Outcome:
    m, n, k = shape
    device = context.device.on(gpu)
    a = torch.randn(m, k, device=device, dtype=dtype)  # (M, K)
    b = torch.randn(k, n, device=device, dtype=dtype)  # (K, N)
    with dtypes.tf32(context.device, torch.backends.cuda.matmul, name):
        out = torch.mm(a, b)  # (M, N)
        times = context.time(lambda: torch.mm(a, b, out=out), gpu)
    seconds, words = median(times)
    return Outcome(sanity=product_sanity(a, b, out, TOLERANCE.get(name, 1e-2)),
                   performance=Performance(value=2.0 * m * n * k / seconds / 1e12, unit="TFLOP/s",
                                           detail=words + (f"; on {device}" if gpu is not None else "")))


def product_sanity(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, tolerance: float) -> Sanity:
    """``out`` is ``a @ b``: its first rows against float64 on the CPU, finite and within ``tolerance``
    of the largest entry."""
    rows = min(CHECKED_ROWS, a.shape[0])
    expect = a[:rows].double().cpu() @ b.double().cpu()
    return close(out[:rows], expect, tolerance)


def measure_sparse(context: Context, shape: tuple[int, int, int], sparsity: float) -> Outcome:
    m, n, k = shape
    device = context.device.main
    generator = torch.Generator().manual_seed(context.seed)
    dense = torch.randn(m, k, generator=generator)  # (M, K), a share `sparsity` of it zeroed
    dense[torch.rand(m, k, generator=generator) < sparsity] = 0.0
    nnz = int((dense != 0).sum().item())
    a = dense.to_sparse_csr().to(device)
    b = torch.randn(k, n, device=device)  # (K, N)
    out = a @ b
    times = context.time(lambda: a @ b)
    seconds, words = median(times)
    return Outcome(sanity=sparse_sanity(dense, b, out),
                   performance=Performance(value=2.0 * nnz * n / seconds / 1e9, unit="GFLOP/s",
                                           detail=f"{nnz} non-zeros; {words}"))


def sparse_sanity(dense: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> Sanity:
    """``out`` is the sparse product of ``dense``'s non-zeros and ``b``: its first rows against float64."""
    rows = min(CHECKED_ROWS, dense.shape[0])
    expect = dense[:rows].double() @ b.double().cpu()
    return close(out[:rows], expect, SPARSE_TOLERANCE)

