"""mltrain's score against mlperf_logging's result summarizer, and the published table recomputed.

    python benchmarks/mlperf_parity.py

1. Builds folders in MLCommons' published layout (the tests' own: 40 NVIDIA-style unet3d runs
   counting epochs in samples, scaling.json, one non-compliant file; 5 resnet runs; the same unet3d
   runs under NVIDIA's <DATESTAMP>_<N>.log names), imports each with `mltrain import`, and prints
   mltrain's score beside the summarizer's on the ORIGINAL folder, with the relative difference.
2. Recomputes every scored row of the shipped published table from its per-run times and says how
   many equal the published score to 1e-9 (after MLCommons' rounding to 3 decimals), and why the
   others do not.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PROJECT))

from mlperf_logging.result_summarizer.result_summarizer import _compute_strong_score_standalone  # noqa: E402

from orchestrator.cli import main as mltrain  # noqa: E402
from orchestrator.mlperf import published  # noqa: E402
from orchestrator.mlperf.checkers import quiet_tools  # noqa: E402
from tests.mlperf.published_layout import Run, resnet_folder, unet3d_folder, unet3d_runs  # noqa: E402


def summarizer(folder: Path, benchmark: str) -> float | None:
    """The summarizer called directly (its log lines kept off the terminal)."""
    with quiet_tools():
        _, _, score, _, _ = _compute_strong_score_standalone(
            benchmark, folder.parent.name, False, str(folder), "training", "4.0.0", return_full_scores=True)
    return score


def imported(folder: Path, benchmark: str, results: Path) -> dict:
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        code = mltrain(["-q", "import", str(folder), "--benchmark", benchmark, "--results", str(results), "--json"])
    assert code == 0
    return json.loads(buffer.getvalue())


def parity() -> None:
    os.environ["MLTRAIN_WORKLOADS"] = str(PROJECT / "tests" / "workloads")
    with tempfile.TemporaryDirectory() as tmp:
        root, results = Path(tmp) / "submission", Path(tmp) / "results"
        runs = unet3d_runs()
        runs[7] = Run(epochs=runs[7].epochs, epoch_ms=1_500, seed=runs[7].seed, break_rule="eval_samples")
        unet3d = unet3d_folder(root, runs=runs, scaling=1.0109450109450109)
        resnet = resnet_folder(root)
        nvidia = Path(tmp) / "nvidia" / "unet3d"
        nvidia.mkdir(parents=True)
        for n in range(40):
            shutil.copyfile(unet3d / f"result_{n}.txt", nvidia / f"240425101502186337271_{n + 1}.log")
        shutil.copyfile(unet3d / "scaling.json", nvidia / "scaling.json")
        print(f"{'folder':<34} {'mltrain min':>18} {'summarizer min':>18} {'relative diff':>14}  olympic x factor")
        for name, folder, benchmark, original in (("unet3d, 40 runs, scaling.json", unet3d, "unet3d", unet3d),
                                                  ("resnet, 5 runs", resnet, "resnet", resnet),
                                                  ("unet3d as <DATESTAMP>_<N>.log", nvidia, "unet3d", unet3d)):
            ours = imported(folder, benchmark, results)
            theirs = summarizer(original, benchmark)
            mine = ours["scaled_score_ms"] / 60000
            print(f"{name:<34} {mine:>18.12f} {theirs:>18.12f} {abs(mine - theirs) / theirs:>14.2e}"
                  f"  {ours['score_ms'] / 60000:.6f} x {ours['scaling_factor']:.6f}"
                  f" (non-converged {ours['non_converged']}, agrees={ours['mlcommons']['agrees']})")


def recompute() -> None:
    systems = published.load()
    scored = [s for s in systems if s.olympic_minutes is not None]
    equal = [s for s in scored if abs(round(s.recomputed_minutes(), 3) - s.olympic_minutes) <= 1e-9]
    print(f"\npublished table: {len(systems)} rows, {len(scored)} with a score; recomputed from run times:"
          f" {len(equal)} equal to 1e-9 after rounding to 3 decimals")
    for benchmark in ("unet3d", "resnet"):
        rows = [s for s in scored if s.benchmark == benchmark]
        same = [s for s in rows if s in equal]
        print(f"  {benchmark}: {len(same)} of {len(rows)} ({sum(s.scaling_factor != 1.0 for s in rows)} scaled)")
    for s in scored:
        if s not in equal:
            print(f"  differs: {s.name} {s.benchmark}: recomputed {s.recomputed_minutes():.6f}, published"
                  f" {s.olympic_minutes} (the mean of 4-decimal run times ends in 5 at the 4th decimal)")
    for s in systems:
        if s.olympic_minutes is None:
            print(f"  no score: {s.name} {s.benchmark}: {s.note}")


if __name__ == "__main__":
    parity()
    recompute()
