"""Silent data corruption: a fixed GEMM and one short training step, each run again from the same
inputs on every GPU (the CPU where there is none), compared bit for bit: across its runs on one GPU
(a flaky unit gives different bits from one run to the next), and across the GPUs of the same model
and SM count (a unit that is wrong every time gives other bits than its peers; cuBLAS promises the same
bits for the same problem on GPUs of the same architecture and SM count).

    spec: {"size": 2048, "width": 1024, "repeats": 2}

Sanity: identical bits, run after run (``sdc_gemm``, ``sdc_step``) and GPU after GPU of one model
(``sdc_agree``: the GPUs whose bits differ from the majority of their model's are named; of two that
differ, neither can be told right, and both are). Performance: milliseconds a run (information only;
what this check judges is the bits). fp32 with TF32 off; the inputs and the model's weights are drawn
on the CPU from the probe's seed, so every GPU starts from the same bits.
"""

from __future__ import annotations

import functools
import hashlib
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import torch

from workloads.common.probe import dtypes
from workloads.common.probe.harness import Case, Context, per_gpu
from workloads.common.probe.protocol import Outcome, Performance, Sanity

DECLARATION = {
    "name": "sdc",
    "kind": "integrity",
    "needs": {"device": "any", "gpus": 0, "data": False},
    "sanity": "a fixed GEMM and a short training step, each run twice from the same inputs on every GPU (or the"
              " CPU), give the same bits every run, and the same bits on every GPU of the same model",
    "units": {"sdc_gemm_ms": "ms", "sdc_step_ms": "ms", "sdc_agree": "GPUs"},
    "sane": {"sdc_*_ms": [0, 1e8], "sdc_agree": [0, 1e6]},
    "timeout_s": 600,
    "repeat": False,
    "device_bound": True,
    "remedy": {"wrong": "replace", "slow": "investigate"},
    "settings": {
        "size": {"type": "int", "min": 16, "default": 2048, "doc": "the GEMM's M = N = K (fp32)"},
        "width": {"type": "int", "min": 8, "default": 1024, "doc": "the training step's two-layer MLP width"},
        "repeats": {"type": "int", "min": 2, "default": 2, "doc": "runs compared bit for bit"},
    },
}
CHECK = DECLARATION["name"]


def cases(spec: dict[str, Any], context: Context) -> Iterator[Case]:
    """Every GPU's GEMM, then every GPU's training step, then (two or more GPUs) each GPU against its
    model's others: the digests of the first two feed the last."""
    digests: dict[tuple[str, int | None], str] = {}
    placements = context.device.placements(True)
    for name, run in (("gemm", functools.partial(gemm, int(spec["size"]))),
                      ("step", functools.partial(step, int(spec["width"])))):
        for gpu in placements:
            yield Case(check=CHECK, metric=per_gpu(f"sdc_{name}_ms", gpu), gpu=gpu,
                       measure=functools.partial(measure, context, name, run, int(spec["repeats"]), gpu, digests))
    if context.device.gpu_count > 1:
        for gpu in placements:
            yield Case(check=CHECK, metric=per_gpu("sdc_agree", gpu), gpu=gpu,
                       measure=functools.partial(agree, context, gpu, digests))


def inputs(seed: int, *shape: int) -> torch.Tensor:
    """Normal values drawn on the CPU from ``seed``: the same bits wherever they are then sent."""
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def gemm(size: int, device: torch.device, seed: int) -> torch.Tensor:
    a, b = inputs(seed, size, size).to(device), inputs(seed + 1, size, size).to(device)  # (S, S) each
    return torch.mm(a, b)  # (S, S)


def step(width: int, device: torch.device, seed: int) -> torch.Tensor:
    """One SGD step of a two-layer MLP on a fixed batch: its loss and its updated weights, flat."""
    w1 = inputs(seed, width, width).div_(width ** 0.5).to(device).requires_grad_()  # (W, W)
    w2 = inputs(seed + 1, width, width).div_(width ** 0.5).to(device).requires_grad_()  # (W, W)
    x, y = inputs(seed + 2, 64, width).to(device), inputs(seed + 3, 64, width).to(device)  # (B, W)
    loss = torch.nn.functional.mse_loss(torch.relu(x @ w1) @ w2, y)
    loss.backward()
    with torch.no_grad():
        for weight in (w1, w2):
            weight -= 0.01 * weight.grad  # type: ignore[operator]
    return torch.cat([loss.detach().reshape(1), w1.detach().flatten(), w2.detach().flatten()])


def measure(context: Context, name: str, run: Callable[[torch.device, int], torch.Tensor], repeats: int,
            gpu: int | None, digests: dict[tuple[str, int | None], str]) -> Outcome:
    device = context.device.on(gpu)
    sync = context.device.sync_on(gpu)
    outputs, seconds = [], []
    with dtypes.tf32(context.device, torch.backends.cuda.matmul, "fp32"):
        for _ in range(repeats):
            started = time.perf_counter()
            outputs.append(run(device, context.seed))
            sync()
            seconds.append(time.perf_counter() - started)
    first = outputs[0]
    digests[(name, gpu)] = hashlib.sha256(first.cpu().numpy().tobytes()).hexdigest()
    differ = [(i + 2, int((out != first).sum().item())) for i, out in enumerate(outputs[1:])
              if not torch.equal(out.view(torch.int32), first.view(torch.int32))]
    what = "GEMM" if name == "gemm" else "training step"
    if differ:
        where = ", ".join(f"run {run_} in {count} of {first.numel()} values" for run_, count in differ)
        sanity = Sanity(passed=False, detail=f"the {what} gave other bits from the same inputs: {where}")
    else:
        sanity = Sanity(passed=True, detail=f"{repeats} runs of the {what} bit for bit identical"
                                            f" (sha256 {digests[(name, gpu)][:12]})")
    return Outcome(sanity=sanity, performance=Performance(
        value=min(seconds) * 1e3, unit="ms", better="lower", detail=f"fastest of {repeats} runs"
                                                                     + (f" on {device}" if gpu is not None else "")))


def agree(context: Context, gpu: int | None, digests: dict[tuple[str, int | None], str]) -> Outcome:
    """GPU ``gpu``'s bits against the majority of the GPUs of its model (and SM count)."""
    model = context.device.identity
    mine = model(gpu or 0)
    peers = [g for g in context.device.placements(True) if model(g or 0) == mine]
    wrong = []
    agree_on: list[int] = []
    for name in ("gemm", "step"):
        votes = Counter(digests.get((name, g)) for g in peers)
        ours = digests.get((name, gpu))
        agree_on.append(votes[ours])
        top = votes.most_common(2)
        tie = len(top) > 1 and top[0][1] == top[1][1]
        if ours is None:
            wrong.append(f"its {name} did not run")
        elif ours != top[0][0] or tie:
            wrong.append(f"its {name} gave other bits than {len(peers) - votes[ours]} of the {len(peers)} {mine[0]}"
                         + (" (no majority: which is wrong cannot be told)" if tie else ""))
    agreeing = min(agree_on)
    sanity = (Sanity(passed=False, detail="; ".join(wrong)) if wrong else
              Sanity(passed=True, detail=f"the same bits as the other {len(peers) - 1} {mine[0]}"))
    return Outcome(sanity=sanity, performance=Performance(value=float(agreeing), unit="GPUs",
                                                          detail=f"{mine[0]} GPUs with its bits, itself included"))
