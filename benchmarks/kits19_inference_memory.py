"""Peak memory of mltrain's 3D-UNet Offline performance test beside the MLPerf Inference reference's, on the
same ONNX model and the same raw cases, each in its own process (the maximum resident set the kernel
counted for it, from wait4), ONNX Runtime on the CPU.

    python benchmarks/kits19_inference_memory.py --reference ~/src/inference              # 6 cases, closed model
    python benchmarks/kits19_inference_memory.py --reference DIR --cases 6 --size 128,160,160 --time 1

The model is the closed 3D U-Net (filters 32..320, 31 M parameters) with random weights, exported as the
inference reference's ONNX (input (N, 1, 128, 128, 128), free batch axis, opset 12). The cases are the
first ``--cases`` of the reference's inference list, synthetic KiTS19 in the raw layout about ``--size``
after resampling, preprocessed by each implementation's own code (identical: kits19_inference_parity.py).
Both tests run with the same user.conf values (``--target-qps``, ``--time`` as min and max duration,
min query count 1: beyond the rules, so LoadGen may say INVALID; memory is what is compared). Ours runs
its defaults otherwise (one window per backend call, its worker threads; ``--workers auto,1,2`` runs it
once per count, ``auto`` being its own choice); the reference runs its run.py as its Makefile does
(``--reference``: a checkout of mlcommons/inference, default $MLPERF_INFERENCE_DIR;
tests/inference/kits19_reference.py says how it is run). ``--repeats N`` runs the whole set N times,
interleaved (a busy host slows whichever runs at the time). Prints per test its peak, the samples its
query held, LoadGen's samples/s and verdict, and the ratios to the reference's peak and samples/s in
the same round, and our warm-up's samples/s (one volume per worker at once, through the workers: what
sizes the auto target). For the test's samples/s to say anything the query must hold a few samples per
worker (``--target-qps`` x ``--time``).

    python benchmarks/kits19_inference_memory.py --reference DIR --workers 1,2 --repeats 3 --target-qps 0.2 --time 30
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PROJECT))

from orchestrator.inference import logs  # noqa: E402
from tests.inference.kits19_reference import ENV, SUBDIR, run  # noqa: E402
from workloads.common.cpus import usable_cpus  # noqa: E402
from workloads.inference.kits19.prepare import prepare  # noqa: E402
from workloads.inference.kits19.preprocess import inference_cases  # noqa: E402
from workloads.unet3d.export import export, save  # noqa: E402
from workloads.unet3d.model import CLOSED_FILTERS, UNet3D, UNet3DConfig  # noqa: E402
from workloads.unet3d.synthetic import parse_size  # noqa: E402
from workloads.unet3d.synthetic_raw import generate_raw  # noqa: E402

REFERENCE_SCRIPT = PROJECT / "tests" / "inference" / "kits19_reference.py"


LAUNCHER = """import os, subprocess, sys
proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
output = proc.stdout.read()
_, status, usage = os.wait4(proc.pid, 0)
sys.stdout.write(output[-1500:] + f"\\nexit {os.waitstatus_to_exitcode(status)} peak_kib {usage.ru_maxrss}\\n")
"""
"""Runs a command and prints its exit and its own peak resident memory. A process this one starts
directly would count this one's peak as its own (Linux carries the parent's high-water mark into a
child that vfork and exec make, and exporting the model at 128^3 peaks at GBs here), so a small
launcher process starts it."""


def peak_mib(argv: list[str], cwd: Path, what: str) -> float:
    """Run ``argv``; the peak resident memory of that process alone, MiB (its exit must be 0)."""
    done = subprocess.run([sys.executable, "-c", LAUNCHER, *argv], cwd=cwd, capture_output=True, text=True,
                          check=False)
    last = done.stdout.strip().splitlines()[-1:] or [""]
    words = last[0].split()
    if done.returncode != 0 or len(words) != 4 or words[1] != "0":
        raise SystemExit(f"{what} failed: {(done.stdout + done.stderr).strip()[-1500:]}")
    return int(words[3]) / 1024  # Linux counts kilobytes


def generated_samples(detail: str) -> object:
    """LoadGen's ``generated_samples_per_query`` (its detail log): the samples the Offline query held."""
    for line in detail.splitlines():
        if '"generated_samples_per_query"' in line:
            return json.loads(line.split(":::MLLOG", 1)[1])["value"]
    return "?"


def measured(argv: list[str], cwd: Path, what: str, logs_dir: Path) -> dict:
    """Run one test; its peak (MiB), the samples its query held, LoadGen's samples/s and verdict."""
    peak = peak_mib(argv, cwd, what)
    perf = logs.performance(logs_dir, "Offline")
    return {"peak_mib": peak, "samples": generated_samples((logs_dir / "mlperf_log_detail.txt").read_text()),
            "samples_per_second": perf.value, "loadgen": "VALID" if perf.loadgen_valid else "INVALID"}


def worker_counts(text: str) -> list[str]:
    """``auto,1,2`` -> ['auto', '1', '2']: the harness's own choice, or a count."""
    counts = [part.strip() for part in text.split(",") if part.strip()]
    if not counts or any(c != "auto" and not (c.isdigit() and int(c) > 0) for c in counts):
        raise argparse.ArgumentTypeError(f"{text!r}: give auto or positive counts, comma-separated")
    return counts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", type=Path, default=os.environ.get(ENV), help=f"default: ${ENV}")
    parser.add_argument("--cases", type=int, default=6, help="the first N of the reference's inference cases")
    parser.add_argument("--size", default="128,160,160", help="the cases' size after resampling, about (D,H,W)")
    parser.add_argument("--filters", default=",".join(map(str, CLOSED_FILTERS)), help="default: the closed model's")
    parser.add_argument("--target-qps", type=float, default=0.01, help="user.conf Offline target_qps, both")
    parser.add_argument("--time", type=float, default=1.0, help="seconds: LoadGen's min and max duration, both")
    parser.add_argument("--workers", type=worker_counts, default=["auto"],
                        help="our harness's worker threads, one test per count (auto: its own choice)")
    parser.add_argument("--repeats", type=int, default=1, help="rounds of every test, interleaved")
    parser.add_argument("--json", type=Path, help="write the measurements here")
    args = parser.parse_args()
    if args.reference is None or not (args.reference / SUBDIR / "run.py").is_file():
        parser.error(f"--reference: give a checkout of mlcommons/inference (it has {SUBDIR}/run.py)")
    folder = args.reference / SUBDIR
    cases = inference_cases()[:args.cases]
    rounds: list[dict[str, dict]] = []
    with tempfile.TemporaryDirectory(prefix="kits19-memory-") as scratch:
        work = Path(scratch)
        (work / "seed").mkdir()
        network = UNet3D(UNet3DConfig(filters=tuple(int(f) for f in args.filters.split(",")))).eval()
        save(network, network.config, (128, 128, 128), work / "seed", {"status": "random weights"})
        model = work / "unet.onnx"
        export(work / "seed", model)
        del network
        generate_raw(work / "raw", int(cases[-1].split("_")[1]) + 1, 0, parse_size(args.size), workers=usable_cpus())
        ours = prepare(work / "raw", work / "cache", workers=usable_cpus())
        shapes = ["x".join(map(str, c["shape"][1:])) for c in ours.index["cases"]]
        conf = work / "user.conf"
        ms = round(args.time * 1000)
        conf.write_text(f"3d-unet.Offline.target_qps = {args.target_qps:g}\n3d-unet.Offline.min_duration = {ms}\n"
                        f"3d-unet.Offline.max_duration = {ms}\n3d-unet.Offline.min_query_count = 1\n")
        run(folder, "preprocess", str(work / "raw"), str(work / "theirs"), *cases)
        for round_ in range(args.repeats):
            tests: dict[str, dict] = {}
            for workers in args.workers:
                out = work / f"ours-{round_}-{workers}"
                harness = [sys.executable, "-m", "workloads.inference", "--model-name", "3d-unet", "--model",
                           str(model), "--data", str(ours.folder), "--out", str(out), "--scenario", "Offline",
                           "--mode", "performance", "--device", "cpu", "--time", f"{args.time:g}",
                           "--min-query-count", "1", "--target-qps", f"{args.target_qps:g}",
                           *([] if workers == "auto" else ["--workers", workers])]
                test = measured(harness, PROJECT, "our harness", out / "performance" / "run_1")
                facts = json.loads((out / "harness.json").read_text())
                tests[f"ours, workers {workers}"] = {**test, "workers": facts.get("workers"),
                                                     "warm_up_qps": facts["warm_up"]["throughput_qps"]}
            logs_dir = work / f"logs-{round_}"
            tests["reference"] = measured([sys.executable, str(REFERENCE_SCRIPT), "offline", str(model),
                                           str(work / "theirs"), str(logs_dir), str(conf)], folder,
                                          "the reference's run.py", logs_dir)
            rounds.append(tests)
    print(f"3D-UNet Offline peak memory, {len(cases)} synthetic cases ({', '.join(shapes)}), filters {args.filters}, "
          f"ONNX Runtime on the CPU, target_qps {args.target_qps:g}, {args.time:g} s, {usable_cpus()} usable CPUs")
    for number, tests in enumerate(rounds, 1):
        theirs = tests["reference"]
        for name, test in tests.items():
            rate, their_rate = test["samples_per_second"], theirs["samples_per_second"]
            speed = f"{rate / their_rate:.2f}x" if rate and their_rate else "?"
            ran = f" (ran {test['workers']})" if test.get("workers") is not None else ""
            warm = f"; warm-up {test['warm_up_qps']:.4g} samples/s" if "warm_up_qps" in test else ""
            print(f"round {number}  {name + ran:26s} peak {test['peak_mib']:8,.0f} MiB = "
                  f"{test['peak_mib'] / theirs['peak_mib']:.2f}x the reference's; {test['samples']} samples in the "
                  f"query, {rate if rate is not None else float('nan'):.4g} samples/s = {speed} "
                  f"(LoadGen {test['loadgen']}){warm}")
    if args.json:
        args.json.write_text(json.dumps({"cases": cases, "shapes": shapes, "filters": args.filters,
                                         "rounds": rounds}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
