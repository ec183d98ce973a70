"""3D-UNet Offline samples/s through mltrain's inference harness (the real LoadGen, ONNX Runtime), at
the reference's one window per backend call (the baseline) and at larger window batches, measured in
the same run on the same model and cases. The samples in the backend on average (the workers'
time in it over the test's) say whether the device was kept busy.

    python benchmarks/kits19_inference_throughput.py --device cuda               # on one GPU
    python benchmarks/kits19_inference_throughput.py --device cpu --filters 4,8 --size 64,96,96 --time 5

The model is the closed 3D U-Net (filters 32..320, 31 M parameters) with random weights, exported as
the inference reference's ONNX (input (N, 1, 128, 128, 128), free batch axis, opset 12): its speed is
the trained model's, its Dice meaningless (no accuracy run). The cases are synthetic KiTS19 in the raw
layout, about --size after resampling (a real case is 128-500 x 200-400 x 200-400), preprocessed by
the inference reference's procedure. One Offline test per window batch, --time seconds each
(LoadGen's min and max duration: beyond the rules, so LoadGen may say INVALID; samples/s is still
what it measured). Prints one line per batch and the ratio to the baseline; --json writes them.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PROJECT))

from orchestrator.inference import logs  # noqa: E402
from workloads.common.cpus import usable_cpus  # noqa: E402
from workloads.inference.kits19.prepare import prepare  # noqa: E402
from workloads.unet3d.export import export, save  # noqa: E402
from workloads.unet3d.model import CLOSED_FILTERS, UNet3D, UNet3DConfig  # noqa: E402
from workloads.unet3d.synthetic import parse_size  # noqa: E402
from workloads.unet3d.synthetic_raw import generate_raw  # noqa: E402

INFERENCE_CASE_IDS = 7
"""Raw case ids 0..6 hold 4 of the reference's inference cases (0, 3, 5, 6)."""


def measure(model: Path, data: Path, out: Path, *, device: str, batch: int, time_s: float) -> dict:
    """One Offline performance test; what harness.json and LoadGen's detail log say of it."""
    command = [sys.executable, "-m", "workloads.inference", "--model-name", "3d-unet", "--model", str(model),
               "--data", str(data), "--out", str(out), "--scenario", "Offline", "--mode", "performance",
               "--device", device, "--max-batch", str(batch), "--time", f"{time_s:g}", "--min-query-count", "1",
               "--target-qps", "auto"]
    done = subprocess.run(command, cwd=PROJECT, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"batch {batch}: the harness failed (exit {done.returncode}): {done.stderr.strip()[-600:]}")
    facts = logs.read_facts(out)
    perf = logs.performance(out / "performance" / "run_1", "Offline")
    test = facts["tests"]["performance"]
    return {"batch": batch, "samples_per_second": perf.value, "loadgen": "VALID" if perf.loadgen_valid else "INVALID",
            "samples": test["samples"], "test_s": test["test_s"], "predict_s": test["predict_s"],
            "providers": facts["providers"],
            "in_flight": test["predict_s"] / test["test_s"] if test["test_s"] else None}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cpu", "cuda", "tensorrt"), default="cuda")
    parser.add_argument("--filters", default=",".join(map(str, CLOSED_FILTERS)), help="default: the closed model's")
    parser.add_argument("--size", default="200,320,320", help="cases' size after resampling, about (D,H,W)")
    parser.add_argument("--batches", default="1,2,4", help="windows per backend call; the first is the baseline")
    parser.add_argument("--time", type=float, default=60.0, help="seconds per test (default 60)")
    parser.add_argument("--json", type=Path, help="write the measurements here")
    args = parser.parse_args()
    batches = [int(b) for b in args.batches.split(",")]
    with tempfile.TemporaryDirectory(prefix="kits19-throughput-") as scratch:
        work = Path(scratch)
        (work / "seed").mkdir()
        network = UNet3D(UNet3DConfig(filters=tuple(int(f) for f in args.filters.split(",")))).eval()
        save(network, network.config, (128, 128, 128), work / "seed", {"status": "random weights"})
        export(work / "seed", work / "unet.onnx")
        generate_raw(work / "raw", INFERENCE_CASE_IDS, 0, parse_size(args.size), workers=usable_cpus())
        prepared = prepare(work / "raw", work / "cache", workers=usable_cpus())
        shapes = sorted({"x".join(map(str, c["shape"][1:])) for c in prepared.index["cases"]})
        rows = [measure(work / "unet.onnx", prepared.folder, work / f"b{b}", device=args.device, batch=b,
                        time_s=args.time) for b in batches]
    base = rows[0]["samples_per_second"]
    print(f"3D-UNet Offline, {len(prepared.index['cases'])} synthetic cases ({', '.join(shapes)}), filters "
          f"{args.filters}, ONNX Runtime on {rows[0]['providers'][0]}, {args.time:g} s per test")
    for row in rows:
        ratio = row["samples_per_second"] / base if base else float("nan")
        print(f"windows per call {row['batch']:>2}: {row['samples_per_second']:.4g} samples/s (LoadGen "
              f"{row['loadgen']}, {row['samples']} samples, {row['in_flight'] or 0:.2f} samples in the backend on "
              f"average) = {ratio:.3g}x the one-window baseline")
    if args.json:
        args.json.write_text(json.dumps({"device": args.device, "filters": args.filters, "shapes": shapes,
                                         "rows": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
