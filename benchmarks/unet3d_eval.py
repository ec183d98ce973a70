"""Sliding-window evaluation seconds per case of the closed unet3d model on this machine.

    python benchmarks/unet3d_eval.py                          # one 192x256x256 case, fp32 and bf16
    python benchmarks/unet3d_eval.py --shape 128,128,128 --modes bf16 --cases 2

The case is random data of a typical preprocessed KiTS19 size (1.6 x 1.2 x 1.2 mm voxels):
window 128^3, overlap 0.5, Gaussian blending, padding -2.2, exactly as in training.
"""

from __future__ import annotations

import argparse
import contextlib
import time

import numpy as np
import torch

from workloads.unet3d.evaluate import evaluate_case, padding
from workloads.unet3d.model import UNet3D, UNet3DConfig

WINDOW = (128, 128, 128)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="192,256,256", help="D,H,W of the preprocessed case")
    parser.add_argument("--modes", default="fp32,bf16", help="fp32, bf16 (autocast), bf16-cl (+channels_last_3d)")
    parser.add_argument("--cases", type=int, default=1)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    shape = tuple(int(s) for s in args.shape.split(","))
    strides = tuple(w // 2 for w in WINDOW)
    padded = [s + a + b for s, (a, b) in zip(shape, padding(shape, WINDOW, strides), strict=True)]
    windows = int(np.prod([(p - w) // st + 1 for p, w, st in zip(padded, WINDOW, strides, strict=True)]))
    rng = np.random.default_rng(0)
    image = rng.standard_normal((1, *shape)).astype(np.float32)
    label = rng.integers(0, 3, (1, *shape)).astype(np.uint8)
    print(f"torch {torch.__version__}, {args.threads} threads, closed model, case {shape}, "
          f"{windows} windows of 128^3 per case (before trim)")
    torch.manual_seed(0)
    model = UNet3D(UNet3DConfig()).eval()
    for mode in args.modes.split(","):
        fmt = torch.channels_last_3d if mode.endswith("-cl") else torch.contiguous_format
        net = model.to(memory_format=fmt)

        def infer(x: torch.Tensor, net=net, fmt=fmt) -> torch.Tensor:
            return net(x.to(memory_format=fmt))

        cast = torch.autocast("cpu", dtype=torch.bfloat16) if mode.startswith("bf16") else contextlib.nullcontext()
        times = []
        with torch.no_grad(), cast:
            for _ in range(args.cases):
                start = time.perf_counter()
                evaluate_case(infer, image, label, WINDOW, 0.5)
                times.append(time.perf_counter() - start)
        print(f"{mode:8s} {np.mean(times):7.2f} s/case  ({np.mean(times) / windows:.2f} s/window; "
              f"42 eval cases ~ {42 * np.mean(times) / 60:.1f} min)", flush=True)


if __name__ == "__main__":
    main()
