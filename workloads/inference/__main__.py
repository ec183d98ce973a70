"""The harness's command line (what ``run_inference.sh`` calls).

Run it from the project root:

    # the smoke model and data (made by `python -m workloads.inference.dataset smoke resnet50 OUT`)
    python -m workloads.inference --model-name resnet50 --model OUT/model.onnx --data OUT/data \\
        --out /tmp/r50-offline --scenario Offline --mode both --time 2 --target-qps auto \\
        --image-size 32 --label-offset 0

    # the reference ONNX model on ImageNet (DIR/val_map.txt), official settings, CUDA
    python -m workloads.inference --model-name resnet50 --model resnet50_v1.onnx --data DIR \\
        --out results/r50 --scenario Server --target-qps 5000 --device cuda --mode both

Exit codes: 0 the tests ran (LoadGen's verdict is in its logs), 2 bad input (one line on stderr), 1 a crash.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from workloads.common.cli import Parser, run_main
from workloads.inference import compliance
from workloads.inference.models import names
from workloads.inference.options import Options
from workloads.inference.run import MODES, run
from workloads.inference.settings import MAX_TEST_S, SCENARIOS


def image_size(text: str) -> tuple[int, int]:
    parts = [int(p) for p in text.split(",")]
    if len(parts) == 1:
        parts *= 2
    if len(parts) != 2 or min(parts) < 8:
        raise argparse.ArgumentTypeError(f"{text!r}: give a side N >= 8 or H,W")
    return parts[0], parts[1]


def positive(kind: type, most: float = float("inf")) -> object:
    def parse(text: str) -> object:
        value = kind(text)
        if not (math.isfinite(value) and 0 < value <= most):
            raise argparse.ArgumentTypeError(f"{text!r}: give a number above 0, at most {most:g}")
        return value
    return parse


def parser() -> argparse.ArgumentParser:
    p = Parser(prog="python -m workloads.inference", description=__doc__.splitlines()[0])
    p.add_argument("--model-name", required=True, choices=names())
    p.add_argument("--model", type=Path, required=True, help="ONNX file (onnxruntime) or torch.export .pt2 (torch)")
    p.add_argument("--data", type=Path, required=True, help="dataset folder in the model's layout")
    p.add_argument("--out", type=Path, required=True, help="results folder (MLPerf Inference layout)")
    p.add_argument("--scenario", choices=SCENARIOS, default="Offline")
    p.add_argument("--backend", choices=("onnxruntime", "torch"), default="onnxruntime")
    p.add_argument("--device", choices=("cpu", "cuda", "tensorrt"), default="cpu",
                   help="tensorrt: ONNX Runtime's TensorRT execution provider (CUDA behind it)")
    p.add_argument("--mode", choices=sorted(MODES), default="performance")
    p.add_argument("--count", type=positive(int), help="use the first N samples; N queries per test (beyond the rules)")
    p.add_argument("--time", type=positive(float, MAX_TEST_S), help="test duration in seconds (beyond the rules)")
    p.add_argument("--min-query-count", type=positive(int),
                   help="LoadGen's min_query_count, samples in Offline (beyond the rules)")
    p.add_argument("--target-qps", help="user.conf target_qps (Offline, Server): a number or auto")
    p.add_argument("--target-latency-ms", help="user.conf target_latency (SingleStream, MultiStream): a number or auto")
    p.add_argument("--max-batch", type=positive(int), help="samples per backend call (default: the model's)")
    p.add_argument("--threads", type=int, default=0,
                   help="backend intra-op threads per call (0: chosen: on the CPU, the usable CPUs shared by the "
                        "workers in Offline and Server; else the backend's default)")
    p.add_argument("--workers", type=positive(int), default=0,
                   help="threads answering Offline and Server queries, each calling the backend (default 2: "
                        "two calls in flight keep the device busy while the other's inputs and outputs move; 1 "
                        "holds one 3D volume at a time, for fewer samples/s)")
    p.add_argument("--trace", action="store_true",
                   help="record the backend's per-operator profile and LoadGen's trace (mlperf_log_trace.json)")
    p.add_argument("--image-size", type=image_size, help="model input side N or H,W (default: the reference's)")
    p.add_argument("--label-offset", type=int, help="added to a classifier's class id (default: the reference's)")
    p.add_argument("--audit", choices=compliance.TESTS,
                   help="run MLPerf Inference's compliance test (its audit.config) as the performance test")
    p.add_argument("--profile", default="", help="the caller's profile name (recorded)")
    p.add_argument("--reference-accuracy", action="store_true",
                   help="with the accuracy test: the model file's own FP32 accuracy on the same samples (on the CPU, "
                        "the file's runtime), what a target is a fraction of where no reference is published")
    p.add_argument("--trust-model", action="store_true",
                   help="load a torch.export program (.pt2), which runs code its author chose: only one you made")
    return p


def _main(argv: list[str] | None) -> None:
    args = parser().parse_args(argv)
    options = Options(model_name=args.model_name, model=args.model, data=args.data, out=args.out,
                      scenario=args.scenario, backend=args.backend, device=args.device, mode=args.mode,
                      count=args.count, time_s=args.time, min_query_count=args.min_query_count,
                      target_qps=args.target_qps,
                      target_latency_ms=args.target_latency_ms, max_batch=args.max_batch, threads=args.threads,
                      workers=args.workers, trace=args.trace, image_size=args.image_size,
                      label_offset=args.label_offset, audit=args.audit, profile=args.profile,
                      trust_model=args.trust_model, reference_accuracy=args.reference_accuracy)
    facts = run(options)
    tests = ", ".join(f"{mode} {t['test_s']:.1f} s" for mode, t in facts["tests"].items())
    accuracy = f", {facts['accuracy']['line']}" if facts["accuracy"] else ""
    sys.stderr.write(f"inference: {facts['model_name']} {facts['scenario']} on {facts['providers'][0]}: {tests}"
                     f"{accuracy}; logs in {args.out}\n")


def main(argv: list[str] | None = None) -> int:
    return run_main(lambda: _main(argv), prefix="inference")


if __name__ == "__main__":
    sys.exit(main())
