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

To run the unmodified reference on a current stack three imports are shimmed, at run time only
(workloads/common/mlcommons.py): ``dllogger`` (its logging backend; a no-op stand-in when absent),
``tqdm`` (identity when absent) and ``scipy.signal.gaussian`` (moved to ``scipy.signal.windows`` in
SciPy 1.13). Nothing of the reference is copied into this repository.

Prints the device, its clocks and power under load (nvidia-ml-py, when present), each contender's
rates and the ratios against the reference; ``--json FILE`` also writes them (rewritten after each
contender, so a run cut short keeps what it measured).
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
from unet3d_contenders import (
    Contender,
    Inputs,
    Result,
    make_inputs,
    our_contender,
    our_settings,
    reference_contender,
    result_of,
    shared_header,
    write_json,
)
from unet3d_variants import VARIANTS, run_variants

from workloads.common.timing import timed_region, timed_regions, warm_up
from workloads.unet3d.evaluate import evaluate_case, sliding_window_logits, trim_slices
from workloads.unet3d.model import UNet3D, UNet3DConfig
from workloads.unet3d.reference import NotTheReference, Reference, copy_weights, import_reference

NVIDIA_TRAIN_PER_GPU = 72.0
"""Samples/s per H100 of NVIDIA's v4.0 8xH100 unet3d result while training (its result logs' throughput), at 7
per GPU (../shared/data/mlperf_published)."""


# ---- timing the contenders -------------------------------------------------------------------------------


def measure(contender: Contender, inputs: Inputs, args: argparse.Namespace, device: torch.device) -> Result:
    """All of one contender's timed regions in a row: training, then evaluation."""
    train_seconds, warm = timed_regions(contender.step, calls=args.steps, repeats=args.repeats, warmup=args.warmup,
                                device=device, sampler=contender.sampler)
    train_gpu = contender.sampler.summary()
    eval_seconds, eval_warm = timed_regions(contender.evaluate, calls=1, repeats=args.repeats, warmup=1, device=device,
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


# ---- report ---------------------------------------------------------------------------------------------


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


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        return run(args)
    except NotTheReference as err:  # its model is not ours parameter for parameter
        raise SystemExit(str(err)) from None


def run(args: argparse.Namespace) -> int:
    """The contenders, or with ``--variants`` the variants of our step."""
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if device.type == "cuda":
        if device.index is None:  # set_device needs an index: plain "cuda" is the current one
            device = torch.device("cuda", torch.cuda.current_device())
        torch.cuda.set_device(device)
    started = time.monotonic()
    try:
        ref = import_reference(args.reference.resolve())
    except NotTheReference as err:
        raise SystemExit(f"--reference {err}") from None
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
