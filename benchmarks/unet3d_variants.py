"""The variants of our unet3d step (benchmarks/unet3d_gpu_throughput.py --variants): each a setting a run
records in its ``resolved_settings``, measured in turn while ``--deadline-s`` allows, with its parity
against the reference's fp32 on the same weights (see that script's docstring)."""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import signal
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import torch
from unet3d_contenders import Contender, Inputs, Result, make_inputs, our_contender, our_settings, write_json

from workloads.common.timing import timed_regions
from workloads.unet3d.precision import autocast
from workloads.unet3d.reference import Reference, copy_weights
from workloads.unet3d.settings import RunSettings, StepKnobs


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
        train_seconds, warm = timed_regions(contender.step, calls=args.steps, repeats=args.repeats, warmup=args.warmup,
                                    device=device, sampler=contender.sampler)
    else:
        train_seconds, warm = [], 0.0
    train_gpu = contender.sampler.summary()
    eval_seconds, eval_warm = timed_regions(contender.evaluate, calls=1, repeats=args.repeats, warmup=1 + args.warmup,
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
