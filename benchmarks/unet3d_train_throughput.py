"""Training samples/s of the closed unet3d model on this machine: fp32 eager against faster CPU modes.

    python benchmarks/unet3d_train_throughput.py                       # 64^3 and 128^3, all modes
    python benchmarks/unet3d_train_throughput.py --sizes 64 --steps 5 --modes fp32,bf16-cl

Each mode: a fresh closed model (31,190,243 parameters), batch 1, SGD Nesterov, Dice+CE loss;
``--warmup`` untimed steps (compilation happens there), then ``--steps`` timed ones. The ratio
to fp32 eager is computed from measurements of the same run.
"""

from __future__ import annotations

import argparse
import contextlib

import torch

from workloads.common.timing import timed_region, warm_up
from workloads.unet3d.losses import DiceCELoss
from workloads.unet3d.model import UNet3D, UNet3DConfig

MODES = {  # name: (autocast dtype, channels_last_3d, torch.compile)
    "fp32": (None, False, False),
    "bf16": (torch.bfloat16, False, False),
    "bf16-cl": (torch.bfloat16, True, False),
    "bf16-compile": (torch.bfloat16, False, True),
    "bf16-cl-compile": (torch.bfloat16, True, True),
}
CPU = torch.device("cpu")


def measure(mode: str, size: int, warmup: int, steps: int) -> tuple[float, float]:
    """(samples/s, seconds of the warm-up steps) of one mode."""
    dtype, channels_last, compile_model = MODES[mode]
    torch.manual_seed(0)
    model = UNet3D(UNet3DConfig())
    fmt = torch.channels_last_3d if channels_last else torch.contiguous_format
    model = model.to(memory_format=fmt)
    net = torch.compile(model) if compile_model else model
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9, nesterov=True)
    loss_fn = DiceCELoss()
    x = torch.randn(1, 1, size, size, size).to(memory_format=fmt)  # (B, 1, D, H, W)
    y = torch.randint(0, 3, (1, 1, size, size, size), dtype=torch.uint8)

    def step() -> None:
        cast = torch.autocast("cpu", dtype=dtype) if dtype else contextlib.nullcontext()
        with cast:
            loss = loss_fn(net(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    warm = warm_up(step, warmup, CPU)
    return steps / timed_region(step, steps, CPU), warm


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="64,128", help="cubic patch sides")
    parser.add_argument("--modes", default=",".join(MODES), help=f"from {','.join(MODES)}")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    modes = args.modes.split(",")
    print(f"torch {torch.__version__}, {args.threads} threads, closed model, batch 1, "
          f"{args.warmup} warm-up + {args.steps} timed steps per mode")
    for size in (int(s) for s in args.sizes.split(",")):
        results = {mode: measure(mode, size, args.warmup, args.steps) for mode in modes}
        base = results.get("fp32", (None, None))[0]
        for mode, (rate, warm) in results.items():
            ratio = f"{rate / base:5.2f}x fp32" if base else ""
            print(f"{size:4d}^3 {mode:16s} {rate:8.3f} samples/s  {1 / rate:7.2f} s/step  {ratio}  "
                  f"(warm-up {warm:.1f} s)", flush=True)
        if base:
            best = max(results, key=lambda m: results[m][0])
            print(f"{size:4d}^3 fastest: {best}, {results[best][0] / base:.2f}x fp32 eager", flush=True)


if __name__ == "__main__":
    main()
