"""How `list`, `compare` and `report` scale with the size of a results folder.

    python benchmarks/store_scale.py                    # 10,000 runs (two labels of 5,000), 3 seeds each
    python benchmarks/store_scale.py --runs 3000 --seeds 5 --rounds 5

Makes a results folder in a temporary directory: one run written through the store as `mltrain
run` writes it (manifest, seed states and records with the host verdict and energy, summary, each
seed's MLLOG output and telemetry series), then copied under new run ids (the copies are what any
store holds: the same files, other ids and labels). Then times the real command lines, each a fresh
process as a user runs them, in rounds (``--rounds``, 3): each round runs every command once, so that a
machine whose speed drifts drifts for every line alike; each line gives the median of its rounds:

- ``list`` with no index file (the first read: rebuilds the index from the folders, and saves it),
  then ``list`` again once the folder settled (the second: every run's files stamped once more, their
  rows not read: the first began within `SETTLE_NS` of the index file it made, so its check cannot
  stand, `Index.checked`), again (the index is up to date: no run looked at), ``list --label a``, and
  ``list`` as a person types it (the table of the newest 50 runs, the index up to date);
- ``compare --label a --label b`` (every run of both setups, from the index);
- ``report --label a --label b --out FILE`` (the HTML page: every run counted, the newest drawn);
- and, as the baseline measured in the same run, ``mltrain --version`` (interpreter and import time);
- ``compare`` and ``report`` of a store of 40 runs: what the commands cost at any size;
- last, once, ``list`` of the same runs as an older mltrain left them (no ``rows.json``, no index):
  every file of every run read once (``--no-older`` skips it).

Each copy's ``rows.json`` (the index rows a run's last write keeps, `orchestrator.results.index_rows`)
is rewritten for its id, label and files, as its manifest and summary are.

The files made are synced to the disk, and the folder left to settle (`settle`), before anything is
timed. Each line gives the wall-clock seconds and the command's own CPU seconds (user + system), and
the spread of the CPU seconds over the rounds: on a shared machine the wall clock also holds the other
tenants' work and the disk's queue, and the same command's CPU seconds drift by a third between
minutes. The project's
modules are compiled first (``compileall``, as installing a package does): where
PYTHONDONTWRITEBYTECODE is set, each command would otherwise compile every module it imports, each time.

Targets (issue 36), printed beside each: list (first, second, up to date), compare and report each
under 2 s of CPU at 10,000 runs and under 10 s at 100,000.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PROJECT))

from orchestrator.insight import quiet  # noqa: E402
from orchestrator.insight.telemetry_summary import seed_energy  # noqa: E402
from orchestrator.mlperf import mllog  # noqa: E402
from orchestrator.mlperf.quality import Goal  # noqa: E402
from orchestrator.mlperf.scoring import score_runs  # noqa: E402
from orchestrator.results.index import SETTLE_NS  # noqa: E402
from orchestrator.results.paths import ROWS_NAME  # noqa: E402
from orchestrator.results.records import Manifest, SeedState, SeedStateName, Summary  # noqa: E402
from orchestrator.results.refresh import run_mtime  # noqa: E402
from orchestrator.results.store import Store, now_iso  # noqa: E402

TARGET = 0.908
SMALL = 40
"""Runs of the small store timed beside the large one: compare and report there are what the commands
cost at any size (interpreter, scipy.special, eight SVG figures), the rest is what the size adds."""


def mllog_text(seed: int, epochs: int) -> str:
    events = [("run_start", None, {}, 0), ("seed", seed, {}, 1)]
    events += [("eval_accuracy", 0.5 + 0.5 * e / epochs, {"epoch_num": e}, 1000 * e) for e in range(1, epochs + 1)]
    events.append(("run_stop", None, {"status": "success"}, 1000 * epochs + 1))
    return "".join(":::MLLOG " + json.dumps({"namespace": "", "time_ms": 1_700_000_000_000 + t, "event_type":
                                             "POINT_IN_TIME", "key": k, "value": v, "metadata": m}) + "\n"
                   for k, v, m, t in events)


def series(start_ms: int, stop_ms: int) -> dict:
    """A 1 Hz telemetry series of one GPU at a steady 300 W on a quiet host, covering the run."""
    t = list(range(start_ms - 2000, stop_ms + 2001, 1000))
    n = len(t)
    return {
        "version": 1, "interval_s": 1.0, "gpu_source": {"available": True, "devices": ["Test GPU"]},
        "dataset_device": "vda",
        "host": {"t_ms": t, "cpu_pct": [30.0] * n, "iowait_pct": [0.0] * n, "memory_used_bytes": [2**33] * n,
                 "disk_read_bytes_per_s": [1e6] * n, "disk_busy_pct": [3.0] * n, "steal_pct": [0.0] * n,
                 "other_cpu_pct": [1.0] * n, "load_1m": [1.0] * n, "memory_pressure_pct": [0.0] * n},
        "gpus": [{"util_pct": [90.0] * n, "memory_used_bytes": [2**34] * n, "power_w": [300.0] * n,
                  "temperature_c": [65.0] * n, "sm_clock_mhz": [1400.0] * n, "throttle_bits": [0] * n,
                  "energy_mj": [None] * n, "other_processes": [0] * n}],
        "sampling_errors": [],
    }


def template(results: Path, seeds: int) -> str:
    """One finished unet3d run written through the store, with telemetry; its id."""
    manifest = Manifest.model_validate({
        "run_id": "template", "workload": "unet3d", "benchmark": "unet3d", "profile": "qualify", "label": "a",
        "seeds": list(range(1, seeds + 1)), "runner": "local", "target": TARGET,
        "rule": {"drop_per_end": 1, "max_non_converged": 1}, "started_at": now_iso(), "state": "running",
    })
    run = Store(results).create(manifest)
    for seed in manifest.seeds:
        text = mllog_text(seed, 20 + seed % 7)
        run.paths.seed(seed).output.write_text(text)
        record = mllog.build_record(mllog.parse_lines(text.splitlines()), goal=Goal(target=TARGET))
        sampled = series(record.run_start_ms, record.run_stop_ms)
        run.paths.seed(seed).telemetry.write_text(json.dumps(sampled))
        record = record.model_copy(update={  # as `mltrain run` keeps them (session.loop.run_one_seed)
            "quiet_host": quiet.judge(sampled, record.run_start_ms, record.run_stop_ms),
            "energy": seed_energy(sampled, record.run_start_ms, record.run_stop_ms)})
        run.save_seed(SeedState(seed=seed, state=SeedStateName.FINISHED), record)
    score = score_runs(run.finished_records(), manifest.rule)
    run.save_summary(Summary.model_validate({**score.to_json(), "run_id": "template", "workload": "unet3d",
                                             "benchmark": "unet3d", "profile": "qualify", "label": "a"}))
    run.save_manifest(run.manifest.model_copy(update={"ended_at": now_iso(), "state": "finished"}))
    run.close()
    return "template"


WRITERS = 32
"""Threads writing the copies: on a shared disk each file made waits on the journal (about 1 ms a
file, 2 ms a folder, 18 of them a run: 10,000 runs took 4 minutes, 100,000 would take 40), and
those waits overlap; the CPU a copy costs is a tenth of that."""


def populate(results: Path, runs: int, seeds: int) -> None:
    """``runs`` copies of one template run, each under its own id and label: every file of the
    template written anew (read once, held in memory), its manifest, summary and rows rewritten."""
    source = results / template(results, seeds)
    kept = {path.relative_to(source).as_posix(): path.read_bytes() for path in sorted(source.rglob("*"))
            if path.is_file() and path.name not in ("manifest.json", "summary.json", ROWS_NAME, ".lock")}
    folders = sorted({str(parent) for name in kept for parent in Path(name).parents} - {"."},
                     key=lambda name: name.count("/"))  # each folder after the one that holds it
    manifest, summary = (json.loads((source / name).read_text()) for name in ("manifest.json", "summary.json"))
    rows = json.loads((source / ROWS_NAME).read_text())

    def copy(n: int) -> None:
        run_id = f"unet3d-qualify-20261123-{n:06d}"
        label = "a" if n % 2 == 0 else "b"
        started = f"2026-11-23T00:00:{n % 60:02d}+00:00"
        folder = results / run_id
        folder.mkdir()
        for name in folders:
            (folder / name).mkdir()
        for name, data in kept.items():
            (folder / name).write_bytes(data)
        (folder / "manifest.json").write_text(json.dumps({**manifest, "run_id": run_id, "label": label,
                                                          "started_at": started}))
        (folder / "summary.json").write_text(json.dumps({**summary, "run_id": run_id, "label": label}))
        run = list(rows["run"])  # run_id, label and started_at as the manifest has them; the time of its files now
        run[0], run[4], run[7] = run_id, label, started
        run[-1] = run_mtime(folder)
        (folder / ROWS_NAME).write_text(json.dumps({**rows, "run": run, "stamp": run[-1],
                                                    "seeds": [[run_id, *row[1:]] for row in rows["seeds"]]}))

    with ThreadPoolExecutor(WRITERS) as pool:
        for _ in pool.map(copy, range(runs)):
            pass
    shutil.rmtree(source)
    (results / "index.db").unlink(missing_ok=True)


def settle(results: Path) -> None:
    """Wait until the folder's time is `SETTLE_NS` old: a listing that began sooner after the folder
    changed saves no full check (`Index.checked`), and the next listing would check every run again,
    not read the index as it stands, which is what "list, second" times."""
    age_ns = time.time_ns() - results.stat().st_mtime_ns
    time.sleep(max(0.0, (SETTLE_NS - age_ns) / 1e9) + 0.1)


def timed(argv: list[str], results: Path) -> tuple[tuple[float, float], subprocess.CompletedProcess[str]]:
    """(wall-clock seconds, the command's CPU seconds) and what it printed."""
    env = {**os.environ, "MLTRAIN_RESULTS": str(results), "PYTHONPATH": str(PROJECT)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "orchestrator.cli", *argv], capture_output=True, text=True, env=env)
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode != 0:
        sys.exit(f"{' '.join(argv)} exited {done.returncode}: {done.stderr[-800:]}")
    return (seconds, cpu), done


def goal(runs: int) -> float | None:
    """Issue 36's goal for a command's CPU seconds at ``runs`` runs: under 2 s up to 10,000, under
    10 s up to 100,000 (None beyond)."""
    return 2.0 if runs <= 10_000 else 10.0 if runs <= 100_000 else None


Times = list[tuple[float, float]]
"""One row's (wall-clock, CPU) seconds, one pair a round."""


def listings(results: Path, runs: int) -> tuple[tuple[float, float], tuple[float, float], tuple[float, float]]:
    """One round of the three listings: with no index (the first), again once the folder settled
    (the second: the first began before its own index file, so every run's time is checked again),
    and again (the index up to date)."""
    (results / "index.db").unlink(missing_ok=True)
    first, listed = timed(["list", "--json"], results)
    assert len(json.loads(listed.stdout)) == runs
    settle(results)  # (a second that began within SETTLE_NS of the index file would not stand either)
    second = timed(["list", "--json"], results)[0]
    return first, second, timed(["list", "--json"], results)[0]


def median(times: Times) -> tuple[float, float]:
    return statistics.median(wall for wall, _ in times), statistics.median(cpu for _, cpu in times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3,
                        help="times each command is timed, round after round; the median is shown, and the spread")
    parser.add_argument("--no-report", action="store_true", help="skip the report (its plots take longest)")
    parser.add_argument("--no-older", action="store_true",
                        help="skip the first list of runs an older mltrain wrote (no rows.json: every file read)")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    target = goal(args.runs)
    with tempfile.TemporaryDirectory(prefix="mltrain-store-scale-") as scratch:
        results = Path(scratch) / "results"
        started = time.perf_counter()
        populate(results, args.runs, args.seeds)
        made = time.perf_counter() - started
        os.sync()  # the files made reach the disk now, not while the commands are timed
        print(f"{args.runs} runs of {args.seeds} seeds made in {made:.1f} s, synced in "
              f"{time.perf_counter() - started - made:.1f} s ({os.cpu_count()} CPUs)")
        settle(results)
        small = Path(scratch) / "small"  # what compare and report cost whatever the store's size
        populate(small, SMALL, args.seeds)
        os.sync()
        settle(small)
        timed(["list", "--json"], small)
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(PROJECT / "orchestrator")], check=True)
        report = ["report", "--label", "a", "--label", "b", "--out", str(Path(scratch) / "report.html")]
        commands: list[tuple[str, list[str], Path, float | None]] = [
            ("mltrain --version (baseline)", ["--version"], results, None),
            ("list --label a", ["list", "--label", "a", "--json"], results, None),
            ("list (the table: the newest 50 runs)", ["list"], results, None),
            (f"compare --label a --label b ({args.runs // 2} + {args.runs - args.runs // 2} runs)",
             ["compare", "--label", "a", "--label", "b", "--json"], results, target),
            *([("report --label a --label b", report, results, target)] if not args.no_report else []),
            (f"compare, a store of {SMALL} runs (its cost at any size)",
             ["compare", "--label", "a", "--label", "b", "--json"], small, None),
            *([(f"report, a store of {SMALL} runs (its cost at any size)", report, small, None)]
              if not args.no_report else []),
        ]
        times: dict[str, Times] = {}
        listed = ("list, first (no index yet)", "list, second (every run's time checked again)",
                  "list, index up to date")
        for _ in range(args.rounds):  # round after round: a machine that drifts drifts for every row alike
            for name, measured in zip(listed, listings(results, args.runs), strict=True):
                times.setdefault(name, []).append(measured)
            for name, argv, folder, _ in commands:
                times.setdefault(name, []).append(timed(argv, folder)[0])
        rows = [(commands[0][0], commands[0][3]), *((name, target) for name in listed),
                *((name, wanted) for name, _, _, wanted in commands[1:])]
        if not args.no_older:
            for kept in results.glob(f"*/{ROWS_NAME}"):
                kept.unlink()
            (results / "index.db").unlink()
            name = "list, first, runs of an older mltrain (no rows.json)"
            times[name] = [timed(["list", "--json"], results)[0]]
            rows.append((name, None))
        base = median(times[commands[0][0]])
        width = max(len(name) for name, _ in rows)  # printed before the folder is removed (minutes of it)
        print(f"median of {args.rounds} round(s); CPU: user + system, its spread over the rounds")
        print(f"{'':<{width}}  {'wall':>9}  {'CPU':>9}  {'CPU spread':>13}  {'/ baseline':>10}  goal (CPU)")
        for name, wanted in rows:
            seconds, cpu = median(times[name])
            spread = [c for _, c in times[name]]
            verdict = "" if wanted is None else f"  under {wanted:g} s: {'met' if cpu < wanted else 'NOT met'}"
            print(f"{name:<{width}}  {seconds:7.2f} s  {cpu:7.2f} s  {min(spread):5.2f}-{max(spread):5.2f} s"
                  f"  {cpu / base[1]:9.1f}x{verdict}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
