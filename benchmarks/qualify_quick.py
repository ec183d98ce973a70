"""Wall time of `mltrain qualify --suite quick` and each phase's share of it.

    python benchmarks/qualify_quick.py                          # this host, local runner, a fresh results folder
    python benchmarks/qualify_quick.py --runner docker --out timings.json -- --data /data/kits19

Runs the real command as a user would (a child process, the project's qualify.yaml), then reads the
phase timings from the record it stored: NVML health reads, runner preparation, probe start-up
(interpreter and torch import), each probe check, the workload's throughput mode, DCGM. What is
left of the wall time is the orchestrator's own (start-up, judging, writing).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PROJECT))
from orchestrator.qualify.catalog import default_registry  # noqa: E402 - the checkout's, found above

ORDER = ("health_reads", "runner_prepare", "probe_startup", *default_registry().names)
"""The phases, then every check, in the registry's order."""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="quick")
    parser.add_argument("--runner", default="local")
    parser.add_argument("--results", type=Path, help="results folder (default: a temporary one)")
    parser.add_argument("--out", type=Path, help="also write the timings as JSON here")
    parser.add_argument("--save-record", type=Path, help="also write the qualification record (JSON) here")
    parser.add_argument("--save-stderr", type=Path, help="also write the progress lines (stderr) here")
    parser.add_argument("extra", nargs="*", help="more `mltrain qualify` options, after --")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="qualify-bench-") as scratch:
        results = args.results or Path(scratch) / "results"
        argv = [sys.executable, "-m", "orchestrator.cli", "qualify", "--suite", args.suite, "--runner", args.runner,
                "--results", str(results), "--json", *args.extra]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(PROJECT), os.environ.get("PYTHONPATH")]))}
        started = time.monotonic()
        done = subprocess.run(argv, cwd=PROJECT, env=env, capture_output=True, text=True)
        wall = time.monotonic() - started
        if args.save_record:
            args.save_record.write_text(done.stdout)
        if args.save_stderr:
            args.save_stderr.write_text(done.stderr)
        if not done.stdout.strip():
            sys.stderr.write(done.stderr[-3000:])
            return done.returncode or 1
        record = json.loads(done.stdout)
    timings = record["timings"]
    rows = [(name, timings[name]) for name in ORDER if name in timings]
    rows.append(("orchestrator (start, judge, write)", max(wall - sum(s for _, s in rows), 0.0)))
    hardware = record["hardware"]
    gpus = f"{hardware['gpu_count']} x {hardware['gpu_model']}" if hardware["gpu_model"] else "no GPU"
    print(f"mltrain qualify --suite {args.suite} --runner {args.runner}: {record['verdict'].upper()}"
          f" (exit {done.returncode}) in {wall:.1f} s wall on {hardware['cpus']} CPUs, {gpus}")
    print(f"{'phase':<36}{'seconds':>9}{'share':>8}")
    for name, seconds in rows:
        print(f"{name:<36}{seconds:>9.2f}{seconds / wall:>8.1%}")
    statuses = ", ".join(f"{c['name']} {c['status']}" for c in record["checks"])
    print(f"checks: {statuses}")
    if args.out:
        args.out.write_text(json.dumps({"wall_s": wall, "exit_code": done.returncode, "phases": dict(rows),
                                        "verdict": record["verdict"], "hardware": record["hardware"]}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
