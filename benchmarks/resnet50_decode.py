"""Decode + augment throughput of the resnet50 input pipeline: images/s per worker, and with N workers.

    python benchmarks/resnet50_decode.py [--images 200] [--workers 2] [--width 500 --height 375]

Writes ``--images`` JPEGs of ImageNet's typical size (500x375, quality 90, synthetic content) into a
temporary folder, then measures in one process (one thread, i.e. one loader worker): PIL decode
only, decode + the training transform (random-resized crop 224 + flip), decode + the evaluation
transform (resize 256 + centre crop 224); then the training pipeline through a DataLoader with
``--workers`` processes. Synthetic pictures are smoother than photographs, so their files are
smaller and decode faster than real ImageNet JPEGs (about 110 kB on average): treat the numbers as
an upper bound. The machine may be shared: rerun to see the noise.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from workloads.resnet50.data_loader import EvalTransform, ImageFolder, ShardSampler, TrainTransform, make_loader
from workloads.resnet50.synthetic import jpeg_bytes, render


def write_images(folder: Path, count: int, width: int, height: int) -> list[Path]:
    paths = []
    for index in range(count):
        rng = np.random.default_rng(index)
        pixels = render(index % 10, 10, max(width, height), rng)[:height, :width]
        path = folder / f"img_{index:05d}.JPEG"
        path.write_bytes(jpeg_bytes(np.ascontiguousarray(pixels), 90))
        paths.append(path)
    return paths


def rate(work, paths: list[Path], repeats: int = 2) -> float:
    started = time.perf_counter()
    for _ in range(repeats):
        for path in paths:
            work(path)
    return len(paths) * repeats / (time.perf_counter() - started)


def decode(path: Path) -> Image.Image:
    with Image.open(path) as image:
        return image.convert("RGB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=200)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--width", type=int, default=500)
    parser.add_argument("--height", type=int, default=375)
    args = parser.parse_args()
    torch.set_num_threads(1)
    train, evaluation = TrainTransform(crop=224), EvalTransform(resize=256, crop=224)
    with tempfile.TemporaryDirectory() as tmp:
        paths = write_images(Path(tmp), args.images, args.width, args.height)
        mean_kb = sum(p.stat().st_size for p in paths) / len(paths) / 1024
        print(f"{args.images} JPEGs of {args.width}x{args.height}, mean {mean_kb:.0f} kB; one process, one thread:")
        print(f"  decode only                       {rate(decode, paths):8.1f} images/s")
        print(f"  decode + random-resized crop+flip {rate(lambda p: train(decode(p)), paths):8.1f} images/s")
        print(f"  decode + resize 256 + centre crop {rate(lambda p: evaluation(decode(p)), paths):8.1f} images/s")
        samples = [(path, 0) for path in paths]
        sampler = ShardSampler(len(samples), rank=0, world=1, shuffle=True, seed=0, batch_size=32, drop_last=False)
        loader = make_loader(ImageFolder(samples, train), sampler, batch_size=32, workers=args.workers, seed=0,
                             pin_memory=False)
        next(iter(loader))  # start the workers
        started = time.perf_counter()
        seen = 0
        for epoch in range(3):
            sampler.set_epoch(epoch)
            seen += sum(batch.labels.numel() for batch in loader)
        total = seen / (time.perf_counter() - started)
        print(f"DataLoader, {args.workers} workers, training transform: {total:8.1f} images/s "
              f"({total / max(args.workers, 1):.1f} per worker)")


if __name__ == "__main__":
    main()
