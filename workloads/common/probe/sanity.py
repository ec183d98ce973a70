"""The comparisons the checks' sanity functions are made of: a result against its float64
reference, relative to the reference's largest entry, and two buffers byte for byte."""

from __future__ import annotations

import torch

from workloads.common.probe.protocol import Sanity


def close(got: torch.Tensor, expect: torch.Tensor, tolerance: float) -> Sanity:
    """``got`` is finite and within ``tolerance`` of ``expect`` (float64), relative to its largest entry."""
    scale = expect.abs().max().item() or 1.0
    error = (got.double().cpu() - expect).abs().max().item() / scale
    finite = bool(torch.isfinite(got).all().item())
    detail = f"max relative error {error:.2g} (tolerance {tolerance:g})" + ("" if finite else "; not finite")
    return Sanity(passed=finite and error <= tolerance, detail=detail)


def identical(got: torch.Tensor, expect: torch.Tensor, what: str) -> Sanity:
    """``got`` holds exactly ``expect``'s bytes (compared where both are, else on the CPU)."""
    if got.device != expect.device:
        got, expect = got.cpu(), expect.cpu()
    same = bool(torch.equal(got, expect))
    return Sanity(passed=same, detail=f"{what} verified byte for byte" if same else f"{what} differs from its source")
