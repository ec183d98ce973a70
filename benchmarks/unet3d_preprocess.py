"""Preprocessing seconds per real-sized synthetic KiTS19 case: one worker vs parallel workers.

    python benchmarks/unet3d_preprocess.py [--cases 8] [--workers N] [--seed 4]

Generates ``--cases`` synthetic cases of real size (512 x 512 x N slices, KiTS19-like spacing)
into a temporary folder, preprocesses them once with one worker process (torch may use every
core inside it) and once with ``--workers`` processes, and prints seconds per case for each and
their ratio, measured in the same run, plus the seconds spent inside the workers (the wall
time of the parallel run also pays for starting the worker processes, which import torch).
Both runs must write identical bytes. The machine may be shared: rerun to see the noise.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from workloads.unet3d.preprocess import PreprocessConfig, preprocess_dataset
from workloads.unet3d.synthetic import parse_size
from workloads.unet3d.synthetic_raw import generate_raw


def timed_run(raw: Path, out: Path, workers: int) -> tuple[float, float, dict]:
    """(wall seconds, summed per-case seconds inside the workers, output md5s)."""
    started = time.perf_counter()
    summary = preprocess_dataset(PreprocessConfig(raw_dir=raw, out_dir=out, min_shape=128, workers=workers))
    seconds = time.perf_counter() - started
    sums = {name: o["md5"] for r in summary.results for name, o in r.entry["outputs"].items()}
    return seconds, sum(r.seconds for r in summary.results), sums


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", type=int, default=8)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--seed", type=int, default=4, help="4: eight cases of 28-82 slices (balanced)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="unet3d-preprocess-bench-") as tmp:
        root = Path(tmp)
        started = time.perf_counter()
        entries = generate_raw(root / "raw", args.cases, args.seed, parse_size("real"), args.workers)
        generated = time.perf_counter() - started
        slices = [entry["shape"][0] for entry in entries]
        raw_mb = sum(p.stat().st_size for p in (root / "raw").rglob("*.nii.gz")) / 1e6
        print(f"cpu cores: {os.cpu_count()}, cases: {args.cases} (512x512 x {slices} slices, "
              f"{raw_mb:.0f} MB gzip), generated in {generated:.1f} s")
        one_s, one_case_s, one_sums = timed_run(root / "raw", root / "one", 1)
        par_s, par_case_s, par_sums = timed_run(root / "raw", root / "par", args.workers)
        if one_sums != par_sums:
            print("ERROR: one-worker and parallel outputs differ", file=sys.stderr)
            return 1
        print(f"1 worker:  {one_s / args.cases:6.2f} s/case wall ({one_s:.1f} s total; "
              f"{one_case_s / args.cases:.2f} s/case inside the worker)")
        print(f"{args.workers} workers: {par_s / args.cases:6.2f} s/case wall ({par_s:.1f} s total, including "
              f"process start-up; {par_case_s / args.cases:.2f} s/case inside the workers)")
        print(f"speed-up parallel vs 1 worker: {one_s / par_s:.2f}x (identical bytes: yes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
