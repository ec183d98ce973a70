"""Training data-loader samples/s (balanced crop, augmentation draws) against what a training step consumes.

    python benchmarks/unet3d_loader.py DATADIR                    # a preprocessed (or synthesized) set
    python benchmarks/unet3d_loader.py DATADIR --workers 0,1,2 --samples 40 --step-rate 0.25

Reads cases like training does (mmap image and label, component boxes cached per process),
patch 128^3, batch 2: the balanced crop and the draw of each sample's flip/brightness/noise
decisions (the model's device applies those, see workloads/unet3d/device_augment.py).
``--step-rate`` is the training throughput to compare with (samples/s; measure it with
unet3d_train_throughput.py), default: measured here for the closed model at bf16 +
channels_last, 128^3, batch 1, 2 steps.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

from workloads.unet3d.augment import BalancedCrop
from workloads.unet3d.data_loader import LoaderSettings, ShardedShuffleSampler, TrainDataset, train_loader
from workloads.unet3d.split import load_split


def loader_rate(data: Path, workers: int, samples: int, patch: int, batch: int) -> float:
    train_ids, _ = load_split(data)
    dataset = TrainDataset(data, train_ids, BalancedCrop(patch=(patch,) * 3, oversampling=0.4))
    sampler = ShardedShuffleSampler(len(train_ids), batch, 0, 1, master_seed=1)
    loader = train_loader(dataset, sampler, LoaderSettings(batch_size=batch, num_workers=workers))
    seen, epoch = 0, 1
    start = time.perf_counter()
    while seen < samples:
        sampler.set_epoch(epoch)
        for image, *_ in loader:
            seen += image.shape[0]
            if seen >= samples:
                break
        epoch += 1
    return seen / (time.perf_counter() - start)


def step_rate(patch: int) -> float:
    from unet3d_train_throughput import measure  # beside this script

    return measure("bf16-cl", patch, warmup=1, steps=2)[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", type=Path)
    parser.add_argument("--workers", default="0,1,2")
    parser.add_argument("--samples", type=int, default=40)
    parser.add_argument("--patch", type=int, default=128)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--step-rate", type=float, default=None, help="training samples/s to compare with")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads(), help="for the training step")
    args = parser.parse_args()
    torch.set_num_threads(1)  # the loader is NumPy/SciPy work
    for workers in (int(w) for w in args.workers.split(",")):
        rate = loader_rate(args.data, workers, args.samples, args.patch, args.batch)
        print(f"loader, {workers} workers: {rate:8.2f} samples/s (patch {args.patch}^3, batch {args.batch})",
              flush=True)
    if args.step_rate:
        print(f"training step consumes {args.step_rate:.3f} samples/s (given with --step-rate)")
    else:
        torch.set_num_threads(args.threads)
        print(f"training step consumes {step_rate(args.patch):.3f} samples/s (closed model, bf16 + channels_last, "
              f"{args.patch}^3, {args.threads} threads, measured)")


if __name__ == "__main__":
    main()
