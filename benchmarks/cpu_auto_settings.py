"""What ``AMP=auto`` and ``THREADS=auto`` choose on this CPU, and the step time of every alternative,
in one run (issue 14: bf16 is native on some CPUs and emulated, several times slower, on others).

    python benchmarks/cpu_auto_settings.py                       # the smoke profile's model
    python benchmarks/cpu_auto_settings.py --closed --shape 64   # the closed model at 64^3

Each contender is the workload's own throughput mode (``workloads/unet3d/throughput.sh``, the same
entry point `mltrain qualify` uses), run as a separate process: precision fp32 and bf16, threads 1
and every usable CPU, and ``auto``. Printed: the CPU's flags that matter, what auto resolved to and
why, each contender's median step time, and its ratio to auto's choice (>1: slower than auto).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from orchestrator.mlperf.mllog import parse_lines  # noqa: E402  (after the path is set)

SMOKE = {"FILTERS": "8,16,32", "INPUT_SHAPE": "24,24,24", "BATCH_SIZE": "2"}
CLOSED = {"FILTERS": "32,64,128,256,320", "BATCH_SIZE": "1"}


def cpu_flags() -> str:
    try:
        flags = next(line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags"))
    except (OSError, StopIteration):
        return "unknown"
    wanted = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile")
    present = set(flags.split(":", 1)[1].split())
    return ", ".join(f"{f}={'yes' if f in present else 'no'}" for f in wanted)


def cpu_model() -> str:
    try:
        line = next(x for x in Path("/proc/cpuinfo").read_text().splitlines() if x.startswith("model name"))
        return line.split(":", 1)[1].strip()
    except (OSError, StopIteration):
        return "unknown"


def measure(env: dict[str, str], steps: int, warmup: int) -> tuple[dict, dict]:
    """(resolved_settings, throughput metadata + value) of one throughput-mode process."""
    full = {**os.environ, **env, "STEPS": str(steps), "WARMUP_STEPS": str(warmup), "DATADIR": "",
            "PYTHON": sys.executable, "PYTHONPATH": str(ROOT)}
    result = subprocess.run(["bash", str(ROOT / "workloads/unet3d/throughput.sh")], env=full, capture_output=True,
                            text=True, timeout=1800)
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"throughput mode failed ({result.returncode}): {last}")
    log = parse_lines(result.stdout.splitlines())
    settings = log.first("resolved_settings")
    throughput = log.first("throughput")
    if settings is None or throughput is None:
        raise RuntimeError("the throughput mode logged no resolved_settings or throughput event")
    return dict(settings.value), {**throughput.metadata, "samples_per_second": throughput.value}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--closed", action="store_true", help="The closed model (filters 32..320), batch 1.")
    parser.add_argument("--shape", type=int, default=None, help="Cubic patch edge (default 24; 64 with --closed).")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    args = parser.parse_args()
    model = dict(CLOSED if args.closed else SMOKE)
    edge = args.shape or (64 if args.closed else 24)
    model["INPUT_SHAPE"] = f"{edge},{edge},{edge}"

    print(f"CPU: {cpu_model()}; {cpu_flags()}; usable CPUs {len(os.sched_getaffinity(0))}")
    print(f"model: filters {model['FILTERS']}, patch {model['INPUT_SHAPE']}, batch {model['BATCH_SIZE']};"
          f" {args.steps} timed steps after {args.warmup}")
    auto_settings, auto = measure({**model, "AMP": "auto", "THREADS": "auto"}, args.steps, args.warmup)
    print(f"auto chose: precision {auto_settings['precision']}, threads {auto_settings['threads']}"
          f" ({auto_settings.get('why', '')})")
    cpus = len(os.sched_getaffinity(0))
    contenders = [(p, t) for p in ("fp32", "bf16") for t in sorted({1, cpus})]
    rows = [("auto", auto_settings["precision"], auto_settings["threads"], auto)]
    for precision, threads in contenders:
        _, measured = measure({**model, "AMP": precision, "THREADS": str(threads)}, args.steps, args.warmup)
        rows.append(("", precision, threads, measured))
    base = auto["step_ms_median"]
    print(f"\n{'':5} {'precision':>9} {'threads':>7} {'step ms (median)':>17} {'samples/s':>10} {'vs auto':>8}")
    for tag, precision, threads, measured in rows:
        step = measured["step_ms_median"]
        print(f"{tag:5} {precision:>9} {threads:>7} {step:17.1f} {measured['samples_per_second']:10.2f}"
              f" {step / base:7.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
