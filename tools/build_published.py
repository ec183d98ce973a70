"""Rebuild mltrain's table of published MLPerf Training results (orchestrator/mlperf/published/systems.csv).

    python tools/build_published.py --from DIR [--out FILE] [--check-summarizer]
    python tools/build_published.py --from-csv ../shared/data/mlperf_published [--out FILE]

``--from DIR``: a folder of checked-out MLCommons results repositories (``DIR/training_results_v4.0``,
``DIR/training_results_v3.1``, ... as ``git clone https://github.com/mlcommons/training_results_v4.0``
makes them; nothing is downloaded here). For every ``<submitter>/results/<system>/<benchmark>/`` of
unet3d, resnet and llama31_8b it reads the result logs with mltrain's MLLOG reader (epochs counted in samples
become epochs), ``scaling.json`` with mlperf_logging's own reader, and ``<submitter>/systems/<system>.json``
for the accelerators; the score is the olympic mean of the converged runs' minutes times the
scaling factor (mltrain's olympic rule, the summarizer's), rounded as MLCommons publishes it (3
decimals; per-run minutes 4). ``--check-summarizer`` also runs mlperf_logging's result summarizer on
each folder (with the round's ruleset) and notes where it differs. Logs in the pre-MLLOG formats of
rounds v0.5 and v0.6 are not read: those systems get no per-run times (a note says so).

``--add`` keeps the table's other rows (the rounds and benchmarks not read), as when adding
llama31_8b from ``training_results_v5.1`` alone to the table built from the shared data set.

``--from-csv DIR``: convert the project's shared data set (``mlperf_published_extended.csv`` and
``mlperf_runs.csv``, collected from the same repositories) into the shipped table.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
from collections import defaultdict
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
if str(PROJECT) not in sys.path:
    sys.path.insert(0, str(PROJECT))

from orchestrator.errors import MltrainError  # noqa: E402
from orchestrator.mlperf import benchmarks, checkers, layout, mllog  # noqa: E402
from orchestrator.mlperf.published import (  # noqa: E402
    TABLE,
    PublishedSystem,
    accelerator_class,
    load,
    write,
)
from orchestrator.mlperf.quality import Goal  # noqa: E402
from orchestrator.mlperf.scoring import olympic_mean  # noqa: E402
from orchestrator.units import minutes as in_minutes  # noqa: E402

BENCHMARKS = ("unet3d", "resnet", "llama31_8b")
TARGETS = {"unet3d": 0.908, "resnet": 0.759, "llama31_8b": 3.3}
LOWER_IS_BETTER = ("llama31_8b",)
"""Benchmarks whose metric falls to the target (a log perplexity)."""
COUNTS_SEQUENCES = ("llama31_8b",)
"""Benchmarks whose table counts sequences to target, not epochs: their logs' train_samples differ by
submitter (NVIDIA's 1,574,207,408, AMD's the samples it trained), their RCPs count sequences."""
EARLY_TARGETS = {("resnet", "v0.5"): 0.749}
"""Quality targets that differ in early rounds."""
DEFAULT_OUT = PROJECT / "orchestrator" / "mlperf" / "published" / TABLE


def from_repositories(folder: Path, *, check_summarizer: bool = False) -> list[PublishedSystem]:
    """One row per results/<system>/<benchmark> of BENCHMARKS in the checked-out repositories."""
    systems = []
    repos = sorted(p for p in folder.glob("training_results_v*") if p.is_dir())
    if not repos:
        raise SystemExit(f"{folder}: no training_results_v* folders (clone MLCommons' results repositories there)")
    for repo in repos:
        round_ = repo.name.removeprefix("training_results_")
        for results in sorted(repo.glob("*/results")):
            submitter = results.parent.name
            for benchmark_dir in sorted(p for b in BENCHMARKS for p in results.glob(f"*/{b}") if p.is_dir()):
                systems.append(_system(benchmark_dir, round_, submitter, check_summarizer))
    return systems


def _system(folder: Path, round_: str, submitter: str, check_summarizer: bool) -> PublishedSystem:
    benchmark, system = folder.name, folder.parent.name
    description_file = folder.parents[2] / "systems" / f"{system}.json"
    description = layout.read_system_description(description_file) if description_file.is_file() else {}
    accelerator, count = layout.accelerators(description)
    notes = []
    minutes: list[float] = []
    epochs: list[float | None] = []
    failed = 0
    batch_sizes = set()
    try:
        files, _ = layout.result_files(folder)
    except MltrainError as exc:
        files, notes = {}, [str(exc)]
    target = EARLY_TARGETS.get((benchmark, round_), TARGETS[benchmark])
    goal = Goal(target=target, better="lower" if benchmark in LOWER_IS_BETTER else "higher")
    for path in files.values():
        log = mllog.parse_file(path)
        record = mllog.build_record(log, goal=goal)
        batch_sizes.add(record.global_batch_size)
        if record.converged and record.time_to_train_ms:
            minutes.append(round(in_minutes(record.time_to_train_ms) or 0.0, 4))
            epochs.append(_sequences_to_target(log, goal) if benchmark in COUNTS_SEQUENCES else record.epochs_to_target)
        else:
            failed += 1
    if files and not minutes:
        notes.append("no log read as a converged MLLOG run (pre-MLLOG format?)")
    factor = checkers.scaling_factor(folder) or 1.0
    unscaled = olympic_mean(minutes, failed, benchmarks.get(benchmark).drop_per_end) if minutes else None
    if check_summarizer and files:
        ruleset = ".".join((round_.removeprefix("v") + ".0").split(".")[:3])
        try:
            theirs, _, _ = checkers.summarizer_score(folder, benchmark, ruleset)
        except Exception as exc:  # noqa: BLE001  (a note in the table, never a stop)
            notes.append(f"summarizer failed: {type(exc).__name__}")
        else:
            ours = unscaled * factor if unscaled is not None else None
            if (theirs is None) != (ours is None) or (ours is not None and abs(theirs - ours) > 1e-3):
                notes.append(f"the {ruleset} summarizer says {theirs}")
    return PublishedSystem(
        round=round_, submitter=submitter, system=system, benchmark=benchmark,
        division=str(description.get("division", "")), accelerator=accelerator or "",
        accelerator_class=accelerator_class(accelerator) or accelerator or "", accelerators=count,
        nodes=layout.whole_number(description.get("number_of_nodes"), 0) or None,
        global_batch_size=batch_sizes.pop() if len(batch_sizes) == 1 else None, runs=len(files),
        nonconverged=failed, scaling_factor=factor,
        olympic_minutes=round(unscaled * factor, 3) if unscaled is not None else None,
        olympic_unscaled=round(unscaled, 3) if unscaled is not None else None,
        run_minutes=tuple(minutes), run_epochs=tuple(epochs), note="; ".join(notes),
    )


def _sequences_to_target(log: mllog.ParsedLog, goal: Goal) -> float | None:
    """samples_count of the first evaluation that reached the goal (what the RCP checker reads)."""
    for event in log.all(goal.metric):
        if mllog.is_number(event.value) and goal.reached(float(event.value)) and "samples_count" in event.metadata:
            return float(event.metadata["samples_count"])
    return None


def merged(systems: list[PublishedSystem], table: Path) -> list[PublishedSystem]:
    """``table``'s rows with those of every (round, benchmark) in ``systems`` replaced by ``systems``'."""
    replaced = {(s.round, s.benchmark) for s in systems}
    kept = [s for s in load(table) if (s.round, s.benchmark) not in replaced] if table.is_file() else []
    return kept + systems


def from_shared_csv(folder: Path) -> list[PublishedSystem]:
    """The shared data set (mlperf_published_extended.csv + mlperf_runs.csv) as the shipped table."""
    runs: dict[tuple[str, ...], list[dict[str, str]]] = defaultdict(list)
    with (folder / "mlperf_runs.csv").open() as handle:
        for row in csv.DictReader(handle):
            runs[(f"v{row['round']}", row["submitter"], row["system"], row["benchmark"])].append(row)
    systems = []
    with (folder / "mlperf_published_extended.csv").open() as handle:
        for row in csv.DictReader(handle):
            key = (row["round"], row["submitter"], row["system"], row["benchmark"])
            samples = row["epoch_note"].startswith("samples")
            converged = [r for r in runs.get(key, []) if r["converged"] == "True" and r["minutes"]]
            absent = int(row["logs_absent"] or 0)
            notes = [f"{absent} logs absent from the snapshot this table was built from"] if absent else []
            if samples:
                notes.append("logs count epochs in samples: divided by 168")
            if row["same_logs_as"]:
                notes.append(f"same logs as {row['same_logs_as']}")
            systems.append(PublishedSystem(
                round=row["round"], submitter=row["submitter"], system=row["system"], benchmark=row["benchmark"],
                division=row["division"], accelerator=row["accelerator"], accelerator_class=row["accel_class"],
                accelerators=int(row["accelerators_total"]) if row["accelerators_total"] else None,
                nodes=int(row["nodes"]) if row["nodes"] else None,
                global_batch_size=_batch_size(row["global_batch_size"]),
                runs=int(row["runs"]), nonconverged=len(runs.get(key, [])) - len(converged),
                scaling_factor=float(row["scaling_factor"] or 1.0),
                olympic_minutes=float(row["olympic_minutes"]) if row["olympic_minutes"] else None,
                olympic_unscaled=float(row["olympic_unscaled"]) if row["olympic_unscaled"] else None,
                run_minutes=tuple(float(r["minutes"]) for r in converged),
                run_epochs=tuple(_epochs(r["last_epoch"], samples, row["benchmark"]) for r in converged),
                note="; ".join(notes),
            ))
    return systems


def _batch_size(text: str) -> int | None:
    """One global batch size; None where the runs used several ('16;28;56')."""
    return int(float(text)) if text and ";" not in text else None


def _epochs(text: str, samples: bool, benchmark: str) -> float | None:
    if not text:
        return None
    value = float(text)
    return value / (benchmarks.get(benchmark).train_samples or 1) if samples else value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--from", dest="repos", type=Path,
                        help="folder of checked-out training_results_v* repositories")
    source.add_argument("--from-csv", type=Path, help="folder of the shared mlperf_published CSV files")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"table to write (default {DEFAULT_OUT})")
    parser.add_argument("--check-summarizer", action="store_true", help="note where the summarizer differs")
    parser.add_argument("--add", action="store_true",
                        help="keep the table's other rows: replace only the rounds and benchmarks read")
    args = parser.parse_args(argv)
    try:
        systems = (from_repositories(args.repos, check_summarizer=args.check_summarizer) if args.repos
                   else from_shared_csv(args.from_csv))
    except MltrainError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    if args.add:
        systems = merged(systems, args.out)
    write(args.out, systems)
    scored = [s for s in systems if s.olympic_minutes is not None]
    median = statistics.median(len(s.run_minutes) for s in systems) if systems else 0
    sys.stderr.write(f"{args.out}: {len(systems)} systems ({len(scored)} scored), median {median:g} runs each\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
