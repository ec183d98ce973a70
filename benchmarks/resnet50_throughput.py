"""ResNet-50 v1.5 training throughput (images/s) on this machine: fp32 eager against faster CPU modes.

    python benchmarks/resnet50_throughput.py              # fp32 eager, fp32 channels_last, bf16 channels_last
    python benchmarks/resnet50_throughput.py --compile    # add bf16 + channels_last + torch.compile
    python benchmarks/resnet50_throughput.py --batch 32 --steps 8 --threads 2

One optimizer step = forward, backward and a LARS step on a (B, 3, 224, 224) batch of random
images with 1000 classes, exactly the trainer's step (workloads.resnet50.engine). Warmup steps are
not timed. All modes run in this one process, interleaved in rounds (best round counts), so the
ratio compares like with like; on a shared machine re-run and compare the ratio, not only the
absolute numbers.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable

import torch
from torch import nn

from workloads.common.timing import timed_region
from workloads.resnet50.data_loader import Normalizer
from workloads.resnet50.engine import Precision
from workloads.resnet50.model import ModelConfig, ResNet50
from workloads.resnet50.optim import build_optimizer


def make_step(precision: Precision, *, compile_model: bool, batch: int, size: int) -> Callable[[], None]:
    """One training step of a fresh ResNet-50 in the given mode, as a closure."""
    torch.manual_seed(0)
    model = ResNet50(ModelConfig(num_classes=1000))
    if precision.channels_last:
        model = model.to(memory_format=torch.channels_last)
    optimizer = build_optimizer("lars", model, lr=1.0, momentum=0.9, weight_decay=5e-5, lars_eta=0.001,
                                lars_epsilon=0.0)
    network = torch.compile(model) if compile_model else model
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
    images = torch.randint(0, 256, (batch, 3, size, size), dtype=torch.uint8)
    labels = torch.randint(0, 1000, (batch,))
    device = torch.device("cpu")
    normalize = Normalizer(device, channels_last=precision.channels_last)

    def step() -> None:
        inputs = normalize(images)
        with precision.autocast(device):
            loss = criterion(network(inputs), labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    return step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--steps", type=int, default=2, help="timed steps per mode and round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds over all modes; the best counts")
    parser.add_argument("--warmup", type=int, default=1, help="untimed steps per mode (compile happens here)")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--compile", action="store_true", help="also bf16 + channels_last + torch.compile")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    modes = [
        ("fp32 eager (NCHW)", Precision(dtype="fp32", channels_last=False), False),
        ("fp32 eager channels_last", Precision(dtype="fp32", channels_last=True), False),
        ("bf16 autocast channels_last", Precision(dtype="bf16", channels_last=True), False),
    ]
    if args.compile:
        modes.append(("bf16 autocast channels_last compile", Precision(dtype="bf16", channels_last=True), True))
    print(f"ResNet-50 v1.5 training step, batch {args.batch}, {args.size}x{args.size}, {args.threads} threads, "
          f"torch {torch.__version__}, {args.rounds} rounds of {args.steps} timed steps after {args.warmup} warmup")
    runners = {}
    for name, precision, compiled in modes:
        runners[name] = make_step(precision, compile_model=compiled, batch=args.batch, size=args.size)
        for _ in range(args.warmup):
            runners[name]()
    # rounds interleave the modes, so that a burst of load elsewhere hits all of them alike
    best = {name: float("inf") for name in runners}
    for round_index in range(args.rounds):
        for name, step in runners.items():
            seconds = timed_region(step, args.steps, torch.device("cpu"))
            best[name] = min(best[name], seconds)
            print(f"  round {round_index + 1}: {name:38s} {args.batch * args.steps / seconds:7.2f} images/s",
                  flush=True)
    rates = {name: args.batch * args.steps / seconds for name, seconds in best.items()}
    print("best round per mode:")
    for name, value in rates.items():
        print(f"  {name:40s} {value:7.2f} images/s")
    baseline = rates[modes[0][0]]
    fastest = max(rates, key=rates.get)
    print(f"fastest: {fastest}, {rates[fastest] / baseline:.2f}x fp32 eager")


if __name__ == "__main__":
    main()
