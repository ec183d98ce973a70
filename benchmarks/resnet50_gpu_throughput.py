"""ResNet-50 training images/s on a GPU against the bound its bf16 matrix rate sets, in one call.

    python benchmarks/resnet50_gpu_throughput.py                      # on a GPU (about 1-2 minutes on an H100)
    python benchmarks/resnet50_gpu_throughput.py --compile            # also the best mode under torch.compile
    python benchmarks/resnet50_gpu_throughput.py --small              # on a CPU: small shapes, for CI
    python benchmarks/resnet50_gpu_throughput.py --json out.json      # the numbers as JSON too

In this one process it measures:
1. the device's bf16 dense matrix rate (an N x N x N product, N = 8192 on a GPU);
2. ResNet-50's training FLOPs per image, counted with torch.utils.flop_counter.FlopCounterMode on the
   meta device (forward + backward; convolutions and matrix products, which is what the bound is about);
3. model-bound training images/s (one random batch already on the device; forward, backward, LARS
   step) of ours in fp32 (NCHW, eager, the plain baseline) and in the best mode (precision auto,
   channels_last, and torch.compile with --compile), and of torchvision's resnet50 in the same
   modes when torchvision is importable (there is no MLPerf PyTorch reference for ResNet-50: the
   reference is TensorFlow);
4. pipeline-bound: the best mode fed by the real training input pipeline (file read, decode,
   random-resized crop, flip, normalize) on synthetic JPEGs of ImageNet's typical size (500x375), for
   every decode path available (torchvision's nvJPEG on a GPU, PIL in loader workers), and each
   pipeline alone;
then prints the GPU's name, clocks and power (nvidia-ml-py), images/s, the bound (matrix rate /
training FLOPs per image) and the ratios. Synthetic JPEGs are smoother than photographs and decode
faster than ImageNet's: treat pipeline numbers as upper bounds.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from workloads.common.devices import device_facts
from workloads.common.distributed import Context
from workloads.common.nvml import gpu_state
from workloads.common.timing import synchronize, timed_region, timed_steps, warm_up
from workloads.resnet50.config import build
from workloads.resnet50.data_loader import DeviceBatch, Normalizer
from workloads.resnet50.engine import Precision, train_step
from workloads.resnet50.gpu_decode import torchvision_decoder
from workloads.resnet50.layout import list_dataset
from workloads.resnet50.model import ModelConfig, ResNet50
from workloads.resnet50.optim import build_optimizer
from workloads.resnet50.pipeline import build_pipelines
from workloads.resnet50.precision import resolve
from workloads.resnet50.runtime import resolve_setup
from workloads.resnet50.synthetic import jpeg_bytes, render

PUBLISHED_H100 = 1_281_167 * 35 / (13.819 * 60) / 8
"""Images/s per GPU of a published 8xH100-SXM ResNet closed result (MLPerf v3.0, Azure ND_H100_v5:
35 epochs in 13.819 minutes olympic mean, evaluation included; ../shared/data/mlperf_published)."""


@dataclass(frozen=True, kw_only=True)
class Shapes:
    batch: int
    crop: int
    steps: int
    warmup: int
    matmul: int
    images: int
    image_size: tuple[int, int]
    workers: int


def shapes(args: argparse.Namespace, device: torch.device) -> Shapes:
    workers = args.workers if args.workers is not None else max(1, min(12, (os.cpu_count() or 2) - 2))
    if args.small or device.type != "cuda":
        return Shapes(batch=args.batch or 8, crop=64, steps=args.steps or 3, warmup=args.warmup or 1, matmul=512,
                      images=args.images or 48, image_size=(100, 75), workers=min(workers, 2))
    return Shapes(batch=args.batch or 256, crop=224, steps=args.steps or 30, warmup=args.warmup or 10, matmul=8192,
                  images=args.images or 2048, image_size=(500, 375), workers=workers)


def matmul_rate(device: torch.device, n: int, dtype: torch.dtype, repeats: int = 10) -> float:
    """Dense FLOP/s of an n x n x n product in ``dtype``."""
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    warm_up(lambda: a @ b, 3, device)
    return 2 * n**3 * repeats / timed_region(lambda: a @ b, repeats, device)


def training_flops_per_image(factory: Callable[[], nn.Module], crop: int) -> tuple[float, float]:
    """(forward, forward + backward) FLOPs per image, counted on the meta device."""
    model = factory().to("meta")
    images = torch.empty(2, 3, crop, crop, device="meta")
    with FlopCounterMode(display=False) as counter:
        logits = model(images)
        forward = counter.get_total_flops()
        nn.functional.cross_entropy(logits, torch.zeros(2, dtype=torch.long, device="meta")).backward()
    return forward / 2, counter.get_total_flops() / 2


def ours() -> nn.Module:
    return ResNet50(ModelConfig(num_classes=1000))


def torchvision_resnet50() -> Callable[[], nn.Module] | None:
    try:
        from torchvision.models import resnet50
    except Exception:  # noqa: BLE001 (a torchvision built for another torch fails in many ways)
        return None
    return lambda: resnet50(weights=None)


@dataclass
class Trainer:
    """One model in one mode: its step on a batch that is given or random."""

    network: nn.Module
    optimizer: torch.optim.Optimizer
    criterion: nn.Module
    precision: Precision
    scaler: torch.amp.GradScaler

    def step(self, batch: DeviceBatch) -> None:
        train_step(self.network, batch, self.optimizer, self.criterion, 0.1, self.precision, self.scaler)


def trainer(factory: Callable[[], nn.Module], precision: Precision, device: torch.device, *,
            compile_model: bool) -> Trainer:
    torch.manual_seed(0)
    model = factory().to(device)
    if precision.channels_last:
        model = model.to(memory_format=torch.channels_last)
    model.train()
    optimizer = build_optimizer("lars", model, lr=0.1, momentum=0.9, weight_decay=5e-5, lars_eta=0.001,
                                lars_epsilon=0.0)
    network = torch.compile(model) if compile_model else model
    return Trainer(network, optimizer, nn.CrossEntropyLoss(label_smoothing=0.1), precision,
                   precision.scaler(device))


def model_bound(run: Trainer, shape: Shapes, device: torch.device) -> tuple[float, float]:
    """(images/s, median step ms) on one random batch already on the device."""
    normalizer = Normalizer(device, channels_last=run.precision.channels_last)
    pixels = torch.randint(0, 256, (shape.batch, 3, shape.crop, shape.crop), dtype=torch.uint8, device=device)
    labels = torch.randint(0, 1000, (shape.batch,), device=device)

    def step() -> None:
        run.step(DeviceBatch(normalizer(pixels), labels, shape.batch, 0))

    for _ in range(shape.warmup):
        step()
    seconds, per_step = timed_steps(step, shape.steps, device)
    return shape.steps * shape.batch / seconds, float(np.median(per_step))


def write_jpegs(root: Path, shape: Shapes, unique: int = 64) -> None:
    """``shape.images`` training JPEGs (and a few validation ones) in the ImageNet layout, 10 classes."""
    width, height = shape.image_size
    encoded = []
    for index in range(min(unique, shape.images)):
        pixels = render(index % 10, 10, max(width, height), np.random.default_rng(index))[:height, :width]
        encoded.append(jpeg_bytes(np.ascontiguousarray(pixels), 90))
    for split, count in (("train", shape.images), ("val", 10)):
        for index in range(count):
            folder = root / split / f"n{index % 10:08d}"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"img_{index:06d}.JPEG").write_bytes(encoded[index % len(encoded)])


def pipeline_rates(data: Path, decode: str, run: Trainer | None, shape: Shapes, device: torch.device,
                   precision: str) -> float:
    """Images/s of the training pipeline alone (``run`` None) or feeding ``run``'s steps."""
    config = build("closed", 1, [f"batch_size={shape.batch}", f"crop={shape.crop}",
                                 f"eval_resize={round(shape.crop * 256 / 224)}", f"workers={shape.workers}",
                                 f"decode={decode}", f"precision={precision}"])
    context = Context(device=device)
    threads = torch.get_num_threads()
    setup = resolve_setup(config, context)
    torch.set_num_threads(threads)
    train_split, val_split = list_dataset(data)
    pipeline, _ = build_pipelines(config, setup.decode, train_split, val_split, context, seed=0)
    epoch = 0

    def batches():
        nonlocal epoch
        while True:
            epoch += 1
            pipeline.set_epoch(epoch)
            yield from pipeline

    stream = batches()
    for _ in range(max(1, shape.warmup // 2)):
        batch = next(stream)
        if run is not None:
            run.step(batch)
    synchronize(device)
    started, seen = time.perf_counter(), 0
    for _ in range(shape.steps):
        batch = next(stream)
        if run is not None:
            run.step(batch)
        seen += batch.count
    synchronize(device)
    rate = seen / (time.perf_counter() - started)
    with contextlib.suppress(Exception):
        stream.close()
    return rate


def free(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.empty_cache()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="small shapes (what a CPU runs in CI)")
    parser.add_argument("--batch", type=int, default=None, help="images per step (256 on a GPU, 8 small)")
    parser.add_argument("--steps", type=int, default=None, help="timed steps per mode (30 on a GPU, 3 small)")
    parser.add_argument("--warmup", type=int, default=None, help="untimed steps per mode (10 on a GPU, 1 small)")
    parser.add_argument("--images", type=int, default=None, help="synthetic JPEGs for the pipeline (2048, 48 small)")
    parser.add_argument("--workers", type=int, default=None, help="loader workers (default: CPUs - 2, at most 12)")
    parser.add_argument("--compile", action="store_true", help="also the best mode under torch.compile")
    parser.add_argument("--no-pipeline", action="store_true", help="skip the pipeline-bound part")
    parser.add_argument("--json", type=Path, default=None, help="also write the numbers here")
    args = parser.parse_args()

    device = torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else torch.device("cpu")
    shape = shapes(args, device)
    torch.backends.cudnn.benchmark = True
    facts = device_facts(device)
    best = resolve("auto", facts.kind, facts.capability, facts.cpu_bf16_native, os.cpu_count() or 1, 1).precision
    report: dict = {"device": facts.name, "capability": facts.capability, "torch": torch.__version__,
                    "shapes": shape.__dict__, "best_precision": best, "modes": {}, "pipelines": {}}
    print(f"ResNet-50 v1.5 training on {facts.name} (torch {torch.__version__}), batch {shape.batch}, "
          f"{shape.crop}x{shape.crop}, {shape.steps} timed steps after {shape.warmup}; best precision here: {best}")
    if device.type == "cuda":
        report["gpu_idle"] = gpu_state(device)
        print(f"GPU before: {report['gpu_idle']}")

    # the bound is the bf16 rate on a GPU; on a CPU, the rate of the precision that runs (bf16 may be emulated)
    matmul_dtype = torch.bfloat16 if device.type == "cuda" or best == "bf16" else torch.float32
    rate = matmul_rate(device, shape.matmul, matmul_dtype)
    forward, training = training_flops_per_image(ours, shape.crop)
    bound = rate / training
    report.update(matmul_flops=rate, matmul_dtype=str(matmul_dtype), forward_flops_per_image=forward,
                  training_flops_per_image=training, bound_images_per_s=bound)
    print(f"{str(matmul_dtype).removeprefix('torch.')} {shape.matmul}^3 matrix product: {rate / 1e12:.3f} TFLOP/s")
    print(f"FLOPs per image (FlopCounterMode): forward {forward / 1e9:.2f} G, training {training / 1e9:.2f} G "
          f"-> bound {bound:,.0f} images/s")

    def save() -> None:  # after each measurement: a run cut short keeps what it measured
        if args.json:
            args.json.write_text(json.dumps(report, indent=2, default=str) + "\n")

    save()
    models = {"ours": ours}
    baseline = torchvision_resnet50()
    if baseline is not None:
        models["torchvision"] = baseline
    modes = {"fp32 NCHW eager": (Precision(dtype="fp32", channels_last=False), False),
             f"{best} channels_last": (Precision(dtype=best, channels_last=True), False)}
    if args.compile:
        modes[f"{best} channels_last compile"] = (Precision(dtype=best, channels_last=True), True)
    print("model-bound (random batch on the device):")
    for model_name, factory in models.items():
        for mode_name, (precision, compiled) in modes.items():
            run = trainer(factory, precision, device, compile_model=compiled)
            images_per_s, step_ms = model_bound(run, shape, device)
            name = f"{model_name} {mode_name}"
            report["modes"][name] = {"images_per_s": images_per_s, "step_ms_median": step_ms,
                                     "of_bound": images_per_s / bound}
            print(f"  {name:42s} {images_per_s:9.1f} images/s  {step_ms:8.2f} ms/step  "
                  f"{images_per_s / bound:6.1%} of the bound", flush=True)
            save()
            del run
            free(device)
    if device.type == "cuda":
        report["gpu_loaded"] = gpu_state(device)
        print(f"GPU after the model-bound runs: {report['gpu_loaded']}")

    if not args.no_pipeline:
        decoders = (["torchvision"] if device.type == "cuda" and torchvision_decoder() is not None else []) + ["pil"]
        print(f"pipeline-bound ({shape.images} synthetic {shape.image_size[0]}x{shape.image_size[1]} JPEGs, "
              f"{shape.workers} loader workers):")
        with tempfile.TemporaryDirectory(prefix="r50-jpegs-") as tmp:
            write_jpegs(Path(tmp), shape)
            for decode in decoders:
                alone = pipeline_rates(Path(tmp), decode, None, shape, device, best)
                run = trainer(ours, Precision(dtype=best, channels_last=True), device, compile_model=False)
                fed = pipeline_rates(Path(tmp), decode, run, shape, device, best)
                del run
                free(device)
                report["pipelines"][decode] = {"alone_images_per_s": alone, "training_images_per_s": fed,
                                               "of_bound": fed / bound}
                synthetic = report["modes"][f"ours {best} channels_last"]["images_per_s"]
                report["pipelines"][decode]["of_synthetic_input"] = fed / synthetic
                print(f"  decode={decode:12s} pipeline alone {alone:9.1f} images/s; training fed by it "
                      f"{fed:9.1f} images/s ({fed / bound:.1%} of the bound, {fed / synthetic:.0%} of the same "
                      "mode on a batch already on the device; target: at least 80%)", flush=True)
                save()

    plain, fast = report["modes"]["ours fp32 NCHW eager"], report["modes"][f"ours {best} channels_last"]
    print("summary:")
    print(f"  ours best / ours fp32: {fast['images_per_s'] / plain['images_per_s']:.2f}x")
    if "torchvision fp32 NCHW eager" in report["modes"]:
        for mode_name in modes:
            ratio = report["modes"][f"ours {mode_name}"]["images_per_s"] / report["modes"][
                f"torchvision {mode_name}"]["images_per_s"]
            print(f"  ours / torchvision, {mode_name}: {ratio:.2f}x")
    best_rate = max(entry["images_per_s"] for name, entry in report["modes"].items() if name.startswith("ours"))
    print(f"  best model-bound: {best_rate:,.0f} images/s = {best_rate / bound:.1%} of the bound "
          f"(issue 15's target: at least 50%)")
    if device.type == "cuda":
        print(f"  for scale: a published 8xH100 closed run trained at about {PUBLISHED_H100:,.0f} images/s per GPU "
              f"({PUBLISHED_H100 / bound:.1%} of this bound), evaluation included")
    save()


if __name__ == "__main__":
    main()
