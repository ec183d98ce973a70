"""The contenders of benchmarks/unet3d_gpu_throughput.py and its variants (benchmarks/unet3d_variants.py):
the reference's and our training step and case evaluation on the same inputs, ready to be timed, and
what both programs record of a measurement (its result, the device, the JSON they rewrite)."""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from workloads.common.distributed import Context
from workloads.common.nvml import GpuSampler
from workloads.unet3d.augment import N_PARAMS, SCALE_COLUMN
from workloads.unet3d.config import TrainConfig
from workloads.unet3d.evaluate import evaluate_case, padding, trim_slices, window_starts
from workloads.unet3d.precision import autocast
from workloads.unet3d.reference import Reference
from workloads.unet3d.settings import RunSettings, StepKnobs, resolve_settings
from workloads.unet3d.step import Trainer, build_trainer, to_device, train_step

FIRST_EPOCH_LR = 1e-4 + (0.8 - 1e-4) / 200  # the reference's learning rate in epoch 1


@dataclass
class Result:
    name: str
    train_samples_per_s: float | None = None
    eval_windows_per_s: float | None = None
    warmup_s: float | None = None
    details: dict[str, object] = field(default_factory=dict)


# ---- inputs ---------------------------------------------------------------------------------------------


@dataclass
class Inputs:
    image: torch.Tensor  # (B, 1, *patch) float32, host (pinned on CUDA)
    label: torch.Tensor  # (B, 1, *patch) uint8
    case_image: torch.Tensor  # (1, D, H, W) float32, host
    case_label: torch.Tensor  # (1, D, H, W) uint8
    windows: int  # sliding windows over the case


def make_inputs(batch: int, patch: tuple[int, int, int], case_shape: tuple[int, int, int],
                device: torch.device, pinned: bool = True) -> Inputs:
    generator = torch.Generator().manual_seed(0)
    image = torch.randn((batch, 1, *patch), generator=generator)
    label = torch.randint(0, 3, (batch, 1, *patch), generator=generator, dtype=torch.uint8)
    case_label = torch.zeros((1, *case_shape), dtype=torch.uint8)
    d, h, w = case_shape
    case_label[0, d // 4: d // 2, h // 4: 3 * h // 4, w // 5: w // 2] = 1  # a kidney
    case_label[0, d // 3: d // 2, h // 3: h // 2, w // 4: w // 3] = 2  # a tumour inside it
    case_image = torch.randn((1, *case_shape), generator=generator) * 0.5 + case_label.float()
    if device.type == "cuda" and pinned:
        image, label, case_image, case_label = (t.pin_memory() for t in (image, label, case_image, case_label))
    strides = tuple(p // 2 for p in patch)
    trimmed = [s.stop - s.start for s in trim_slices(case_shape, strides)]
    padded = [n + a + b for n, (a, b) in zip(trimmed, padding(tuple(trimmed), patch, strides), strict=True)]
    return Inputs(image, label, case_image, case_label, len(window_starts(padded, patch, strides)))


# ---- contenders -----------------------------------------------------------------------------------------


@dataclass
class Contender:
    """One implementation's training step and case evaluation, ready to be timed."""

    name: str
    step: Callable[[], None]
    """One training step on the benchmark's batch (sets the model's train mode and the flags it runs with)."""
    evaluate: Callable[[], None]
    """One evaluation of the benchmark's case (sets eval mode)."""
    batch: int
    details: dict[str, object]
    sampler: GpuSampler
    trainer: Trainer | None = None
    """Ours: the model, loss and settings the step runs (for the parity check)."""


def reference_contender(ref: Reference, inputs: Inputs, args: argparse.Namespace, device: torch.device, amp: bool
                        ) -> Contender:
    """The reference's step (runtime/training.py) and evaluation (runtime/inference.py)."""
    torch.manual_seed(0)
    model = ref.unet3d(1, 3, normalization="instancenorm", activation="relu").to(device)
    loss_fn = ref.dice_ce_loss(to_onehot_y=True, use_softmax=True, layout="NCDHW", include_background=False)
    score_fn = ref.dice_score(to_onehot_y=True, use_argmax=True, layout="NCDHW", include_background=False)
    optimizer = torch.optim.SGD(model.parameters(), lr=FIRST_EPOCH_LR, momentum=0.9, nesterov=True, weight_decay=0.0)
    scaler = torch.amp.GradScaler(device.type, enabled=amp)
    cast = (lambda: torch.autocast(device.type, dtype=torch.float16)) if amp else contextlib.nullcontext

    def step() -> None:
        torch.backends.cudnn.benchmark = amp  # its run_and_time.sh passes no --cudnn_benchmark; with --amp we add it
        model.train()
        image, label = inputs.image.to(device), inputs.label.to(device)
        with cast():
            output = model(image)
            loss_value = loss_fn(output, label)
            loss_value /= 1  # ga_steps
        scaler.scale(loss_value).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
        ref.reduce_tensor(loss_value, 1).detach().cpu().numpy()  # the reference reads the loss every step

    def evaluate() -> None:
        torch.backends.cudnn.benchmark = amp
        model.eval()
        image, label = inputs.case_image[None].to(device), inputs.case_label[None].to(device)
        with torch.no_grad(), cast():
            output, label = ref.sliding_window_inference(inputs=image, labels=label, roi_shape=args.patch,
                                                         model=model, overlap=0.5, mode="gaussian", padding_val=-2.2)
            score_fn(output, label).cpu()

    return Contender("reference-amp" if amp else "reference", step, evaluate, args.batch,
                     {"precision": "fp16" if amp else "fp32", "cudnn_benchmark": amp}, GpuSampler(device))


def our_settings(device: torch.device, precision: str, compile_model: bool,
                 channels_last: bool | None = None, knobs: StepKnobs | None = None,
                 eval_batch: int | None = None) -> RunSettings:
    return resolve_settings(device=device, requested_precision=precision, threads=None, nproc=1,
                            channels_last=channels_last, compile_model=compile_model, num_workers=None,
                            eval_batch=eval_batch, knobs=knobs)


def our_contender(name: str, settings: RunSettings, inputs: Inputs, args: argparse.Namespace) -> Contender:
    """This workload's step (step.py) and evaluation (evaluate.py), at the batch of ``inputs``."""
    device = settings.device
    patch = tuple(args.patch)
    batch = inputs.image.shape[0]
    config = TrainConfig(data_dir=Path("."), results_dir=Path("."), batch_size=batch, input_shape=patch,
                         val_input_shape=patch, learning_rate=FIRST_EPOCH_LR, lr_warmup_epochs=0)
    torch.manual_seed(0)
    trainer = build_trainer(config, settings, Context(device=device))
    params = torch.zeros((batch, N_PARAMS), dtype=torch.float64)
    params[:, SCALE_COLUMN] = 1.0  # no flip, brightness unchanged, no noise: the tensors the reference gets
    cudnn_benchmark = settings.cudnn_benchmark  # what build_trainer set

    def step() -> None:
        torch.backends.cudnn.benchmark = cudnn_benchmark
        trainer.model.train()
        train_step(trainer, *to_device((inputs.image, inputs.label, params), settings))

    def evaluate() -> None:
        torch.backends.cudnn.benchmark = cudnn_benchmark
        trainer.eval_model.eval()
        with torch.inference_mode(), autocast(settings.precision, device):
            evaluate_case(trainer.eval_model, inputs.case_image, inputs.case_label, patch, 0.5, device=device,
                          batch=settings.eval_batch, memory_format=settings.memory_format,
                          fixed_batch=settings.compile).cpu()

    details = {"precision": settings.precision, "channels_last": settings.channels_last,
               "compile": settings.compile_mode if settings.compile else None, "eval_batch": settings.eval_batch,
               "cudnn_benchmark": settings.cudnn_benchmark, "fused_loss": settings.fused_loss,
               "pinned": inputs.image.is_pinned(), "batch": batch}
    return Contender(name, step, evaluate, batch, details, GpuSampler(device), trainer)


def result_of(contender: Contender, inputs: Inputs, args: argparse.Namespace, train_seconds: list[float],
              eval_seconds: list[float], warm: float, eval_warm: float, train_gpu: dict) -> Result:
    """Rates from the medians of the timed regions; every region's seconds in the details (the spread)."""
    details = {**contender.details, "train_region_s": train_seconds, "eval_region_s": eval_seconds,
               "eval_warmup_s": eval_warm, "train_gpu": train_gpu, "eval_gpu": contender.sampler.summary()}
    return Result(contender.name, args.steps * contender.batch / statistics.median(train_seconds),
                  inputs.windows / statistics.median(eval_seconds), warm, details)


# ---- what both programs record -----------------------------------------------------------------------------


def describe(device: torch.device) -> dict[str, object]:
    info: dict[str, object] = {"torch": torch.__version__, "device": str(device)}
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        info.update(name=props.name, capability=f"{props.major}.{props.minor}", memory_gib=props.total_memory / 2**30,
                    multiprocessors=props.multi_processor_count, cuda=torch.version.cuda,
                    cudnn=torch.backends.cudnn.version())
    else:
        from workloads.unet3d.precision import device_name

        info.update(name=device_name(device), threads=torch.get_num_threads())
    return info


def write_json(path: Path | None, header: dict, results: list[Result], check: dict | None) -> None:
    if path is None:
        return
    payload = {**header, "results": [r.__dict__ for r in results], "dice_check": check}
    path.write_text(json.dumps(payload, indent=2, default=str) + "\n")


def shared_header(args: argparse.Namespace, device: torch.device, **after_shape: object) -> dict[str, object]:
    """What both modes' JSON header records of the device and the run's shape (``after_shape``: keys
    written after case_shape, in the order given)."""
    return {"device_info": describe(device), "gpu_static": GpuSampler(device).static(), "batch": args.batch,
            "patch": args.patch, "case_shape": args.case_shape, **after_shape, "steps": args.steps,
            "repeats": args.repeats, "warmup": args.warmup, "full": not args.small}
