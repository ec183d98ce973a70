"""unet3d training samples/s and evaluation windows/s: the MLPerf reference beside ours, in one call.

    # on a GPU: full closed shapes (128^3 patch, batch 2), the reference from a checkout
    python benchmarks/unet3d_gpu_throughput.py --reference /path/to/training/retired_benchmarks/unet3d/pytorch

    # on a CPU (CI): the closed model at 64^3, batch 1, few steps
    python benchmarks/unet3d_gpu_throughput.py --reference DIR --small

    # on a shared CPU: one step per timed region, 7 regions each, the contenders taking turns
    python benchmarks/unet3d_gpu_throughput.py --reference DIR --small --device cpu --steps 1 --repeats 7

    # the variants of our step (batch 7, compile modes, fused loss, ...), within 100 s, against the
    # reference numbers of a run above on the same GPU
    python benchmarks/unet3d_gpu_throughput.py --reference DIR --variants all --deadline-s 100 --baseline ref.json

    # a dry run of either on a CPU (--small): what gpu_session.sh runs where there is no GPU
    python benchmarks/unet3d_gpu_throughput.py --reference DIR --small --variants all

Contenders, each on the same input tensors (a pinned host batch, copied to the device every step
as a loader would hand it over), the same number of steps, warm-up excluded, the device
synchronised around each timed region, the median of ``--repeats`` timed regions (the slowest and
fastest region's rate printed beside it in brackets). ``--interleave`` (the default on a CPU) builds
the contenders first and lets their timed regions take turns, A B then B A..., so that other jobs on
the machine slow them alike; without it (the default on a GPU) one contender at a time is built,
timed and freed, and only one model holds the GPU's memory at a time:

- ``reference``: the MLPerf reference (mlcommons/training ``retired_benchmarks/unet3d/pytorch``)
  as its run_and_time.sh runs it: its Unet3D, DiceCELoss and sliding_window_inference imported from
  ``--reference`` at run time, fp32, ``cudnn.benchmark`` off, the step of its runtime/training.py
  (blocking copies, SGD Nesterov, the loss read back to the host every step);
- ``reference-amp`` (GPU only): the same with its own ``--amp --cudnn_benchmark`` flags (fp16 + GradScaler);
- ``ours-fp32``: this workload's step in fp32 (cudnn.benchmark, fused SGD, device-side augmentation);
- ``ours-best``: the closed-legal mode ``auto`` resolves for this device (bf16 on Ampere and newer,
  fp16 + GradScaler on V100/T4), eager, NCDHW; ``ours-best-cl`` the same in channels_last_3d (GPU;
  says whether the eager InstanceNorm's layout copies eat the channels_last gain);
  ``ours-best-compiled`` adds torch.compile and channels_last (GPU, unless ``--no-compile``; the
  warm-up column shows the compile time, spent before run_start in a real run).

Variants (``--variants``, in this order, each a setting a run records in its ``resolved_settings``:
``COMPILE``/``COMPILE_MODE``, ``CHANNELS_LAST``, ``CUDNN_BENCHMARK``, ``FUSED_LOSS``, ``PIN_MEMORY``,
``EVAL_BATCH``, ``BATCH_SIZE``, ``AMP``): ours in the closed-legal precision ``auto`` resolves, at batch 2 (the
reference's) and 7 (NVIDIA's per-GPU batch in its v4.0 8-GPU submissions: global 56), eager or
compiled in each torch.compile mode, with the fused Dice+CE loss, without cuDNN's autotuner, from
unpinned host memory, in fp16 with loss scaling (the path a V100 or T4 takes), and evaluation at 1
and 8 windows per call. ``--deadline-s`` starts a variant
only when its estimated cost (``Variant.cost_s``, an H100's compile and measurement) still fits, so
the cheap and likely ones come first and a variant that cannot finish is named as skipped. Each
variant's parity: its loss on the benchmark's batch and its logits on one window, in its own
precision and layout, against the reference's fp32 on the same weights (relative differences).

Evaluation: one synthetic case through each implementation's sliding-window inference (window =
patch, overlap 0.5, Gaussian blending), the case copied from pinned host memory and the Dice
computed, as each evaluates a case. Windows/s = windows of the case / seconds.

Dice check: the reference's and our sliding-window inference on the same weights (ours copied into
the reference's model) and the same case, in strict fp32 (TF32 off), report both Dice pairs and the
largest difference of the blended logits.

To run the unmodified reference on a current stack three imports are shimmed, at run time only:
``dllogger`` (its logging backend; a no-op stand-in when absent), ``tqdm`` (identity when absent)
and ``scipy.signal.gaussian`` (moved to ``scipy.signal.windows`` in SciPy 1.13). Nothing of the
reference is copied into this repository.

Prints the device, its clocks and power under load (nvidia-ml-py, when present), each contender's
rates and the ratios against the reference; ``--json FILE`` also writes them (rewritten after each
contender, so a run cut short keeps what it measured).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib.machinery
import importlib.util
import json
import logging
import os
import signal
import statistics
import sys
import threading
import time
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import torch

from workloads.common.distributed import Context
from workloads.unet3d.augment import N_PARAMS, SCALE_COLUMN
from workloads.unet3d.config import TrainConfig
from workloads.unet3d.evaluate import evaluate_case, padding, sliding_window_logits, trim_slices, window_starts
from workloads.unet3d.model import UNet3D, UNet3DConfig
from workloads.unet3d.precision import autocast
from workloads.unet3d.settings import RunSettings, StepKnobs, resolve_settings
from workloads.unet3d.step import Trainer, build_trainer, to_device, train_step

FIRST_EPOCH_LR = 1e-4 + (0.8 - 1e-4) / 200  # the reference's learning rate in epoch 1
NVIDIA_TRAIN_PER_GPU = 72.0
"""Samples/s per H100 of NVIDIA's v4.0 8xH100 unet3d result while training (its result logs' throughput), at 7
per GPU (../shared/data/mlperf_published)."""


# ---- the reference, imported from its folder ----------------------------------------------------------


@dataclass
class Reference:
    """The pieces of the reference implementation this benchmark calls."""

    unet3d: type
    dice_ce_loss: type
    dice_score: type
    sliding_window_inference: Callable
    reduce_tensor: Callable


def _stub_module(name: str) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__spec__ = importlib.machinery.ModuleSpec(name, loader=None)  # torch._dynamo looks modules up
    return module


def _shim_missing_modules() -> None:
    """Stand-ins for what the reference imports but a current stack may lack (see the docstring)."""
    if importlib.util.find_spec("dllogger") is None:
        dllogger = _stub_module("dllogger")

        class _Backend:
            def __init__(self, *args: object, **kwargs: object) -> None:
                pass

        dllogger.StdOutBackend = dllogger.JSONStreamBackend = _Backend
        dllogger.Verbosity = types.SimpleNamespace(DEFAULT=0, VERBOSE=1)
        dllogger.init = dllogger.log = dllogger.flush = dllogger.metadata = lambda *a, **k: None
        sys.modules["dllogger"] = dllogger
    if importlib.util.find_spec("tqdm") is None:
        tqdm = _stub_module("tqdm")
        tqdm.tqdm = lambda iterable=None, *args, **kwargs: iterable
        sys.modules["tqdm"] = tqdm
    import scipy.signal

    if not hasattr(scipy.signal, "gaussian"):
        scipy.signal.gaussian = scipy.signal.windows.gaussian


def import_reference(folder: Path) -> Reference:
    """Import the reference's model, loss, score and inference from ``folder`` (its pytorch/ folder)."""
    if not (folder / "model" / "unet3d.py").is_file() or not (folder / "runtime" / "inference.py").is_file():
        raise SystemExit(f"--reference {folder}: not the reference's unet3d pytorch folder "
                         "(expected model/unet3d.py and runtime/inference.py)")
    _shim_missing_modules()
    sys.path.insert(0, str(folder))
    from model.losses import DiceCELoss, DiceScore
    from model.unet3d import Unet3D
    from runtime.distributed_utils import reduce_tensor
    from runtime.inference import sliding_window_inference

    logging.getLogger("mllog_default").disabled = True  # its layers log weights_initialization per conv
    return Reference(Unet3D, DiceCELoss, DiceScore, sliding_window_inference, reduce_tensor)


def copy_weights(ours: torch.nn.Module, theirs: torch.nn.Module) -> None:
    """Our closed model's parameters into the reference's, by registration order (same architecture)."""
    mine, other = list(ours.parameters()), list(theirs.parameters())
    if len(mine) != len(other) or any(a.shape != b.shape for a, b in zip(mine, other, strict=True)):
        raise SystemExit("the reference's model does not match ours parameter for parameter")
    with torch.no_grad():
        for a, b in zip(mine, other, strict=True):
            b.copy_(a)


# ---- the device's state ---------------------------------------------------------------------------------


class GpuSampler:
    """Samples the GPU's SM clock, memory clock and power every 0.1 s while in a ``with`` block (NVML)."""

    def __init__(self, device: torch.device) -> None:
        self.samples: list[tuple[float, float, float]] = []
        self._nvml = None
        self._handle = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if device.type != "cuda":
            return
        try:
            import pynvml

            pynvml.nvmlInit()
            props = torch.cuda.get_device_properties(device)
            bus = f"{props.pci_domain_id:08x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0"
            try:
                self._handle = pynvml.nvmlDeviceGetHandleByPciBusId(bus)
            except pynvml.NVMLError:
                self._handle = pynvml.nvmlDeviceGetHandleByIndex(device.index or 0)
            self._nvml = pynvml
        except Exception as err:  # pynvml raises its own NVMLError types; clocks are optional
            sys.stderr.write(f"no clocks or power: {err}\n")

    def read(self) -> tuple[float, float, float]:
        nv = self._nvml
        return (float(nv.nvmlDeviceGetClockInfo(self._handle, nv.NVML_CLOCK_SM)),
                float(nv.nvmlDeviceGetClockInfo(self._handle, nv.NVML_CLOCK_MEM)),
                nv.nvmlDeviceGetPowerUsage(self._handle) / 1000.0)

    def static(self) -> dict[str, object]:
        if self._nvml is None:
            return {}
        nv = self._nvml
        return {"max_sm_clock_mhz": nv.nvmlDeviceGetMaxClockInfo(self._handle, nv.NVML_CLOCK_SM),
                "max_mem_clock_mhz": nv.nvmlDeviceGetMaxClockInfo(self._handle, nv.NVML_CLOCK_MEM),
                "power_limit_w": nv.nvmlDeviceGetEnforcedPowerLimit(self._handle) / 1000.0,
                "driver": nv.nvmlSystemGetDriverVersion()}

    def reset(self) -> None:
        self.samples = []

    def __enter__(self) -> GpuSampler:
        if self._nvml is not None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, daemon=True)
            self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            self.samples.append(self.read())

    def __exit__(self, *exc: object) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()

    def summary(self) -> dict[str, float]:
        if not self.samples:
            return {}
        sm, mem, power = zip(*self.samples, strict=True)
        return {"sm_clock_mhz": statistics.median(sm), "mem_clock_mhz": statistics.median(mem),
                "power_w": statistics.median(power), "power_w_max": max(power)}


# ---- timing ---------------------------------------------------------------------------------------------


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def warm_up(fn: Callable[[], None], calls: int, device: torch.device) -> float:
    """Seconds of ``calls`` untimed calls."""
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    sync(device)
    return time.perf_counter() - start


def timed_region(fn: Callable[[], None], calls: int, device: torch.device, sampler: GpuSampler) -> float:
    """Seconds of ``calls`` calls, the device synchronised around them."""
    with sampler:
        sync(device)
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        sync(device)
        return time.perf_counter() - start


def timed(fn: Callable[[], None], *, calls: int, repeats: int, warmup: int, device: torch.device,
          sampler: GpuSampler) -> tuple[list[float], float]:
    """(seconds per timed region of ``calls`` calls, for each repeat; seconds of the warm-up calls)."""
    warm = warm_up(fn, warmup, device)
    sampler.reset()
    return [timed_region(fn, calls, device, sampler) for _ in range(repeats)], warm


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


def measure(contender: Contender, inputs: Inputs, args: argparse.Namespace, device: torch.device) -> Result:
    """All of one contender's timed regions in a row: training, then evaluation."""
    train_seconds, warm = timed(contender.step, calls=args.steps, repeats=args.repeats, warmup=args.warmup,
                                device=device, sampler=contender.sampler)
    train_gpu = contender.sampler.summary()
    eval_seconds, eval_warm = timed(contender.evaluate, calls=1, repeats=args.repeats, warmup=1, device=device,
                                    sampler=contender.sampler)
    return result_of(contender, inputs, args, train_seconds, eval_seconds, warm, eval_warm, train_gpu)


def interleaved_order(contenders: list[Contender], repeat: int) -> list[Contender]:
    """A B C, then C B A, then A B C...: no contender always runs first or after the same one."""
    return contenders if repeat % 2 == 0 else contenders[::-1]


def measure_interleaved(contenders: list[Contender], inputs: Inputs, args: argparse.Namespace,
                        device: torch.device) -> list[Result]:
    """Every contender's timed regions taking turns (one region each per repeat), training then evaluation,
    so a drift of the machine (other jobs, clocks) falls on all of them alike."""
    warm = {c.name: warm_up(c.step, args.warmup, device) for c in contenders}
    train: dict[str, list[float]] = {c.name: [] for c in contenders}
    for c in contenders:
        c.sampler.reset()
    for repeat in range(args.repeats):
        for c in interleaved_order(contenders, repeat):
            train[c.name].append(timed_region(c.step, args.steps, device, c.sampler))
    train_gpu = {c.name: c.sampler.summary() for c in contenders}
    eval_warm = {c.name: warm_up(c.evaluate, 1, device) for c in contenders}
    evaluation: dict[str, list[float]] = {c.name: [] for c in contenders}
    for c in contenders:
        c.sampler.reset()
    for repeat in range(args.repeats):
        for c in interleaved_order(contenders, repeat):
            evaluation[c.name].append(timed_region(c.evaluate, 1, device, c.sampler))
    return [result_of(c, inputs, args, train[c.name], evaluation[c.name], warm[c.name], eval_warm[c.name],
                      train_gpu[c.name]) for c in contenders]


def dice_check(ref: Reference, inputs: Inputs, args: argparse.Namespace, device: torch.device) -> dict[str, object]:
    """Both sliding-window inferences on the same weights and case, strict fp32."""
    tf32 = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    try:
        torch.manual_seed(1)
        ours = UNet3D(UNet3DConfig()).to(device).eval()
        theirs = ref.unet3d(1, 3, normalization="instancenorm", activation="relu").to(device).eval()
        copy_weights(ours, theirs)
        patch = tuple(args.patch)
        image, label = inputs.case_image.to(device), inputs.case_label.to(device)
        with torch.no_grad():
            their_logits, their_label = ref.sliding_window_inference(
                inputs=image[None], labels=label[None], roi_shape=list(patch), model=theirs, overlap=0.5,
                mode="gaussian", padding_val=-2.2)
            their_dice = ref.dice_score(to_onehot_y=True, use_argmax=True, layout="NCDHW",
                                        include_background=False)(their_logits, their_label)
            our_dice = evaluate_case(ours, inputs.case_image, inputs.case_label, patch, 0.5, device=device,
                                     batch=4 if device.type == "cuda" else 1)
            strides = tuple(p // 2 for p in patch)
            trim = (slice(None), *trim_slices(tuple(image.shape[1:]), strides))
            our_logits = sliding_window_logits(ours, image[trim][None], patch, 0.5)
        their, mine = their_dice.double().cpu().tolist(), our_dice.double().cpu().tolist()
        return {"reference_dice": their, "our_dice": mine,
                "max_dice_difference": max(abs(a - b) for a, b in zip(their, mine, strict=True)),
                "max_logit_difference": float((their_logits.float() - our_logits).abs().max()),
                "logit_scale": float(their_logits.float().abs().max())}
    finally:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = tf32


# ---- variants of our step --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Variant:
    """One way of running our step, as the settings of a run (``StepKnobs`` and the rest) would ask for it."""

    name: str
    batch: int
    cost_s: float
    """Estimated seconds to build, compile and measure it on an H100 (for ``--deadline-s``)."""
    compile_mode: str | None = None
    """None: eager."""
    channels_last: bool | None = False
    """None: auto (on with compile)."""
    fused_loss: bool = False
    cudnn_benchmark: bool = True
    pinned: bool = True
    eval_batch: int | None = None
    """None: auto (4 on CUDA)."""
    train: bool = True
    """False: only evaluation is timed."""
    precision: str = "auto"
    """fp16: the path V100 and T4 take (autocast fp16 + GradScaler), measured on this GPU."""
    cuda_only: bool = False
    """Compiling or device-only knobs: skipped in a CPU dry run."""

    def settings(self, device: torch.device) -> RunSettings:
        knobs = StepKnobs(compile_mode=self.compile_mode or "default", cudnn_benchmark=self.cudnn_benchmark,
                          fused_loss=self.fused_loss, pin_memory=self.pinned)
        return our_settings(device, self.precision, self.compile_mode is not None, self.channels_last, knobs,
                            self.eval_batch)


VARIANTS = (
    Variant("b7", 7, 15),
    Variant("b7-compile", 7, 90, compile_mode="default", channels_last=None, cuda_only=True),
    Variant("b2-fused-loss", 2, 12, fused_loss=True),
    Variant("b7-fused-loss", 7, 15, fused_loss=True),
    Variant("eval-batch-8", 2, 8, eval_batch=8, train=False),
    Variant("eval-batch-1", 2, 8, eval_batch=1, train=False),
    Variant("b2-unpinned", 2, 12, pinned=False, cuda_only=True),
    Variant("b2-no-cudnn-benchmark", 2, 12, cudnn_benchmark=False, cuda_only=True),
    Variant("b2-fp16", 2, 12, precision="fp16", cuda_only=True),
    Variant("b7-compile-cudagraphs", 7, 100, compile_mode="reduce-overhead", channels_last=None, cuda_only=True),
    Variant("b2-compile", 2, 80, compile_mode="default", channels_last=None, cuda_only=True),
    Variant("b7-compile-max-autotune", 7, 240, compile_mode="max-autotune-no-cudagraphs", channels_last=None,
            cuda_only=True),
)
"""In the order they are tried: the likely and cheap first, so a deadline cuts the long shots."""


def variant_parity(contender: Contender, ref: Reference, args: argparse.Namespace) -> dict[str, float]:
    """The variant's logits on one evaluation batch of windows and its loss on them, run as its evaluation
    runs them (precision, layout, compiled graph), against the reference's model in fp32 on the same weights
    and its DiceCELoss: relative differences. Run after the timing, so a compiled variant compiles nothing."""
    trainer = contender.trainer
    settings = trainer.settings
    device = settings.device
    theirs = ref.unet3d(1, 3, normalization="instancenorm", activation="relu").to(device).eval()
    copy_weights(trainer.base, theirs)
    generator = torch.Generator().manual_seed(2)
    windows = torch.randn((settings.eval_batch, 1, *args.patch), generator=generator).to(device)
    label = torch.randint(0, 3, (settings.eval_batch, 1, *args.patch), generator=generator, dtype=torch.uint8)
    label = label.to(device)
    tf32 = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    try:
        trainer.eval_model.eval()
        with torch.inference_mode():
            with autocast(settings.precision, device):
                mine = trainer.eval_model(windows.contiguous(memory_format=settings.memory_format)).float()
            our_loss = float(trainer.loss_fn(mine, label))
            torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
            their = theirs(windows).float()
            loss_fn = ref.dice_ce_loss(to_onehot_y=True, use_softmax=True, layout="NCDHW", include_background=False)
            their_loss = float(loss_fn(their, label))
    finally:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = tf32
    scale = float(their.abs().max()) or 1.0
    return {"loss": our_loss, "reference_loss": their_loss,
            "loss_rel_diff": abs(our_loss - their_loss) / abs(their_loss),
            "logit_rel_diff": float((mine - their).abs().max()) / scale}


def measure_variant(variant: Variant, ref: Reference, args: argparse.Namespace, device: torch.device,
                    inputs_for: Callable[[int, bool], Inputs]) -> Result:
    batch = min(variant.batch, 2) if args.small else variant.batch
    inputs = inputs_for(batch, variant.pinned)
    contender = our_contender(variant.name, variant.settings(device), inputs, args)
    if variant.train:
        train_seconds, warm = timed(contender.step, calls=args.steps, repeats=args.repeats, warmup=args.warmup,
                                    device=device, sampler=contender.sampler)
    else:
        train_seconds, warm = [], 0.0
    train_gpu = contender.sampler.summary()
    eval_seconds, eval_warm = timed(contender.evaluate, calls=1, repeats=args.repeats, warmup=1 + args.warmup,
                                    device=device, sampler=contender.sampler)
    details = {**contender.details, "train_region_s": train_seconds, "eval_region_s": eval_seconds,
               "eval_warmup_s": eval_warm, "train_gpu": train_gpu, "eval_gpu": contender.sampler.summary(),
               "parity": variant_parity(contender, ref, args)}
    rate = args.steps * batch / statistics.median(train_seconds) if train_seconds else None
    return Result(variant.name, rate, inputs.windows / statistics.median(eval_seconds), warm, details)


class DeadlineReached(Exception):
    """``--deadline-s`` passed while a variant was being measured."""


@contextlib.contextmanager
def deadline(seconds: float | None) -> Iterator[None]:
    """Raise DeadlineReached in the main thread once ``seconds`` have passed (None: never)."""
    if seconds is None:
        yield
        return

    def reached(signum: int, frame: object) -> None:
        raise DeadlineReached

    previous = signal.signal(signal.SIGALRM, reached)
    signal.setitimer(signal.ITIMER_REAL, max(seconds, 0.01))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def baseline_rates(path: Path | None) -> dict[str, Result]:
    """The reference's (and reference-amp's) results from an earlier --json of this script."""
    if path is None:
        return {}
    try:
        payload = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise SystemExit(f"--baseline {path}: cannot read it ({err})") from None
    return {r["name"]: Result(**r) for r in payload.get("results", []) if r.get("name", "").startswith("reference")}


def run_variants(ref: Reference, args: argparse.Namespace, device: torch.device, header: dict,
                 started: float) -> int:
    """Each variant in turn while the deadline allows, its JSON rewritten after each."""
    cuda = device.type == "cuda"
    cache: dict[tuple[int, bool], Inputs] = {}

    def inputs_for(batch: int, pinned: bool) -> Inputs:
        if (batch, pinned) not in cache:
            cache.clear()  # one batch's tensors at a time
            cache[batch, pinned] = make_inputs(batch, tuple(args.patch), args.case_shape, device, pinned)
        return cache[batch, pinned]

    baseline = baseline_rates(args.baseline)
    header["baseline"] = {name: {"train_samples_per_s": r.train_samples_per_s,
                                 "eval_windows_per_s": r.eval_windows_per_s} for name, r in baseline.items()}
    results: list[Result] = []
    skipped: list[dict[str, object]] = []
    header["skipped"] = skipped
    slower = 1.0  # how much longer than their estimates the variants so far took (this device, this load)
    for variant in args.variants:
        left = None if args.deadline_s is None else args.deadline_s - (time.monotonic() - started)
        cost = variant.cost_s * slower
        if variant.cuda_only and not cuda:
            skipped.append({"name": variant.name, "why": "needs CUDA (a dry run on the CPU)"})
        elif left is not None and cost > left:
            why = f"its ~{cost:.0f} s did not fit the {left:.0f} s left"
            skipped.append({"name": variant.name, "why": why})
        else:
            begun = time.monotonic()
            try:
                with deadline(left):
                    result = measure_variant(variant, ref, args, device, inputs_for)
            except DeadlineReached:
                skipped.append({"name": variant.name,
                                "why": f"stopped at the deadline after {time.monotonic() - begun:.0f} s"})
                write_json(args.json, header, results, None)
                break
            slower = max(slower, (time.monotonic() - begun) / variant.cost_s)
            results.append(result)
            gc.collect()
            if cuda:
                torch.cuda.empty_cache()
            print_variant(result, baseline)
        write_json(args.json, header, results, None)
    for item in skipped:
        print(f"{item['name']:24s} skipped: {item['why']}", flush=True)
    return 0


def print_variant(result: Result, baseline: dict[str, Result]) -> None:
    parity = result.details["parity"]
    train = "train        -        " if result.train_samples_per_s is None else \
        f"train {result.train_samples_per_s:9.3f} samples/s"
    ratios = "".join(f", {result.train_samples_per_s / r.train_samples_per_s:5.2f}x {name}"
                     for name, r in baseline.items() if result.train_samples_per_s and r.train_samples_per_s)
    print(f"{result.name:24s} {train}  eval {result.eval_windows_per_s:9.3f} windows/s  "
          f"(batch {result.details['batch']}, {result.details['precision']}, warm-up {result.warmup_s:.1f} s{ratios}; "
          f"parity vs reference fp32: loss {parity['loss_rel_diff']:.1e}, logits {parity['logit_rel_diff']:.1e})",
          flush=True)


# ---- report ---------------------------------------------------------------------------------------------


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


def spread(result: Result, phase: str, header: dict[str, object]) -> str:
    """' [slowest-fastest]' rate of the timed regions, when there are several."""
    seconds = result.details.get(f"{phase}_region_s") or []
    if len(seconds) < 2:
        return ""
    work = header["steps"] * result.details.get("batch", header["batch"]) if phase == "train" else header["windows"]
    return f" [{work / max(seconds):.3f}-{work / min(seconds):.3f}]"


def report(results: list[Result], check: dict[str, object] | None, header: dict[str, object]) -> None:
    print(f"device: {header['device_info'].get('name')} ({header['device_info']})")
    if header.get("gpu_static"):
        print(f"gpu: {header['gpu_static']}")
    print(f"shapes: batch {header['batch']} x {header['patch']}, eval case {header['case_shape']} "
          f"({header['windows']} windows), {header['steps']} steps x {header['repeats']} repeats, "
          f"warm-up {header['warmup']}, {'interleaved' if header.get('interleaved') else 'one after the other'}, "
          f"load average at start {tuple(round(v, 2) for v in header.get('load_average', ()))}")
    base = next((r for r in results if r.name == "reference"), None)
    for r in results:
        ratio = ""
        if base and r is not base and base.train_samples_per_s and r.train_samples_per_s:
            ratio = (f"  train {r.train_samples_per_s / base.train_samples_per_s:5.2f}x ref, "
                     f"eval {r.eval_windows_per_s / base.eval_windows_per_s:5.2f}x ref")
        gpu = r.details.get("train_gpu") or {}
        clocks = (f"  [SM {gpu['sm_clock_mhz']:.0f} MHz, mem {gpu['mem_clock_mhz']:.0f} MHz, "
                  f"{gpu['power_w']:.0f} W]") if gpu else ""
        print(f"{r.name:20s} train {r.train_samples_per_s:9.3f} samples/s{spread(r, 'train', header)}  "
              f"eval {r.eval_windows_per_s:9.3f} windows/s{spread(r, 'eval', header)}"
              f"  (warm-up {r.warmup_s:.1f} s, {r.details.get('precision')}){ratio}{clocks}", flush=True)
    ours = [r for r in results if r.name.startswith("ours-best")]
    if base and ours and header["full"]:
        best = max(ours, key=lambda r: r.train_samples_per_s or 0)
        amp = next((r for r in results if r.name == "reference-amp"), None)
        against_amp = f"{best.train_samples_per_s / amp.train_samples_per_s:.2f}x" if amp else "not measured"
        print(f"targets: train >= 2x reference --amp: {against_amp} ({best.name}); >= {NVIDIA_TRAIN_PER_GPU:.0f} "
              f"samples/s (NVIDIA's per-GPU training rate): {best.train_samples_per_s:.1f}; eval >= 3x reference: "
              f"{max(r.eval_windows_per_s for r in ours) / base.eval_windows_per_s:.2f}x")
    if check:
        print(f"dice check (fp32, same weights and case): reference {check['reference_dice']}, "
              f"ours {check['our_dice']}, max |diff| {check['max_dice_difference']:.2e}; "
              f"logits max |diff| {check['max_logit_difference']:.2e} of max |logit| {check['logit_scale']:.2e}",
              flush=True)


def write_json(path: Path | None, header: dict, results: list[Result], check: dict | None) -> None:
    if path is None:
        return
    payload = {**header, "results": [r.__dict__ for r in results], "dice_check": check}
    path.write_text(json.dumps(payload, indent=2, default=str) + "\n")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reference", type=Path, required=True, help="the reference's unet3d pytorch folder")
    p.add_argument("--small", action="store_true", help="CPU-sized shapes: 64^3 patch, batch 1, 1 step")
    p.add_argument("--variants", default=None,
                   help="measure our step's variants instead: all, or names from "
                        + ", ".join(v.name for v in VARIANTS))
    p.add_argument("--deadline-s", type=float, default=None,
                   help="start a contender only while its estimated cost fits in this many seconds from the start")
    p.add_argument("--baseline", type=Path, default=None,
                   help="a --json of this script with the reference's rates (for the variants' ratios)")
    p.add_argument("--device", default=None, help="cuda or cpu (default: cuda when available)")
    p.add_argument("--steps", type=int, default=None, help="timed steps per repeat (default 10, --small 2)")
    p.add_argument("--repeats", type=int, default=None, help="timed regions; the median counts (default 3, small 1)")
    p.add_argument("--warmup", type=int, default=None, help="untimed steps first (default 3, --small 1)")
    p.add_argument("--case-shape", default=None, help="D,H,W of the evaluation case (default 192,256,256)")
    p.add_argument("--no-compile", action="store_true", help="skip ours-best-compiled")
    p.add_argument("--no-reference-amp", action="store_true", help="skip reference-amp")
    p.add_argument("--json", type=Path, default=None, help="also write the results here")
    p.add_argument("--interleave", action=argparse.BooleanOptionalAction, default=None,
                   help="time the contenders' regions in turns (default on a CPU, whose cores other jobs share; "
                        "off on a GPU, where the contenders would hold the GPU's memory together)")
    args = p.parse_args(argv)
    args.batch, args.patch = (1, [64, 64, 64]) if args.small else (2, [128, 128, 128])
    args.steps = args.steps or (1 if args.small else 10)
    args.repeats = args.repeats or (1 if args.small else 3)
    args.warmup = args.warmup if args.warmup is not None else (1 if args.small else 3)
    if args.variants is not None:
        wanted = [v.name for v in VARIANTS] if args.variants == "all" else args.variants.split(",")
        unknown = sorted(set(wanted) - {v.name for v in VARIANTS})
        if unknown:
            p.error(f"--variants: unknown {', '.join(unknown)}; known: {', '.join(v.name for v in VARIANTS)}")
        args.variants = [v for v in VARIANTS if v.name in wanted]
    if args.interleave is None:
        args.interleave = (args.device or ("cuda" if torch.cuda.is_available() else "cpu")).startswith("cpu")
    default_case = "64,64,96" if args.small else "192,256,256"
    args.case_shape = tuple(int(v) for v in (args.case_shape or default_case).split(","))
    return args


def shared_header(args: argparse.Namespace, device: torch.device, **after_shape: object) -> dict[str, object]:
    """What both modes' JSON header records of the device and the run's shape (``after_shape``: keys
    written after case_shape, in the order given)."""
    return {"device_info": describe(device), "gpu_static": GpuSampler(device).static(), "batch": args.batch,
            "patch": args.patch, "case_shape": args.case_shape, **after_shape, "steps": args.steps,
            "repeats": args.repeats, "warmup": args.warmup, "full": not args.small}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if device.type == "cuda":
        if device.index is None:  # set_device needs an index: plain "cuda" is the current one
            device = torch.device("cuda", torch.cuda.current_device())
        torch.cuda.set_device(device)
    started = time.monotonic()
    ref = import_reference(args.reference.resolve())
    if args.variants is not None:
        header = {**shared_header(args, device), "load_average": os.getloadavg(), "deadline_s": args.deadline_s}
        return run_variants(ref, args, device, header, started)
    inputs = make_inputs(args.batch, tuple(args.patch), args.case_shape, device)
    header = {**shared_header(args, device, windows=inputs.windows), "interleaved": args.interleave,
              "load_average": os.getloadavg()}
    results: list[Result] = []
    check = None

    def done(result: Result) -> None:
        results.append(result)
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()
        write_json(args.json, header, results, check)
        print(f"  measured {result.name}: {result.train_samples_per_s:.3f} samples/s, "
              f"{result.eval_windows_per_s:.3f} windows/s", file=sys.stderr, flush=True)

    cuda = device.type == "cuda"
    fp32, best = our_settings(device, "fp32", False), our_settings(device, "auto", False)
    builders: list[Callable[[], Contender]] = [lambda: reference_contender(ref, inputs, args, device, amp=False)]
    if cuda and not args.no_reference_amp:
        builders.append(lambda: reference_contender(ref, inputs, args, device, amp=True))
    builders.append(lambda: our_contender("ours-fp32", fp32, inputs, args))
    if best.precision != fp32.precision:
        builders.append(lambda: our_contender("ours-best", best, inputs, args))
    if cuda:
        builders.append(lambda: our_contender("ours-best-cl", our_settings(device, "auto", False, channels_last=True),
                                              inputs, args))
    if args.interleave:
        for result in measure_interleaved([build() for build in builders], inputs, args, device):
            done(result)
    else:
        for build in builders:  # one contender alive at a time
            done(measure(build(), inputs, args, device))
    if best.precision == fp32.precision:
        mine = next(r for r in results if r.name == "ours-fp32")
        results.insert(results.index(mine) + 1, Result("ours-best", mine.train_samples_per_s, mine.eval_windows_per_s,
                                                       mine.warmup_s, {**mine.details, "same_as": "ours-fp32"}))
    check = dice_check(ref, inputs, args, device)
    write_json(args.json, header, results, check)
    report(results, check, header)
    if cuda and not args.no_compile:  # last and alone: compiling takes minutes
        done(measure(our_contender("ours-best-compiled", our_settings(device, "auto", True), inputs, args), inputs,
                     args, device))
        print("with torch.compile:")
        report(results, check, header)
    return 0


if __name__ == "__main__":
    sys.exit(main())
