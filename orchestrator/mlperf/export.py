"""Export a run in the MLCommons results layout, so that mlperf_logging's tools read it directly:

    <DIR>/systems/<system>.json                       system description (system_desc_checker passes)
    <DIR>/results/<system>/<benchmark>/result_<n>.txt one per finished seed: its :::MLLOG lines

The folder is scored with the summarizer itself (`Export.summarizer_minutes`), to compare with ours. The
summarizer runs the ruleset's compliance checker on each file first and counts a file that fails
as a non-converged run; for those files the checker is run again to say why.
"""

from __future__ import annotations

import contextlib
import io
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from orchestrator.errors import UsageError
from orchestrator.mlperf import system_desc
from orchestrator.mlperf.mllog import mllog_lines
from orchestrator.results import atomic
from orchestrator.results.records import Manifest
from orchestrator.results.store import StoredRun

USAGE = "training"
DEFAULT_RULESET = "4.0.0"  # the last training round that had unet3d and resnet (both retired after it)


@dataclass(frozen=True, kw_only=True)
class ResultFile:
    """One exported result file and what the compliance checker said."""

    seed: int
    """The seed whose log it holds."""
    path: Path
    """Where it was written."""
    compliant: bool
    """The ruleset's compliance checker passed it."""
    messages: tuple[str, ...]
    """What the checker reported (first lines)."""


@dataclass(frozen=True, kw_only=True)
class Export:
    """What `export_run` wrote."""

    root: Path
    system_name: str
    benchmark: str
    ruleset: str
    system_file: Path
    results: tuple[ResultFile, ...]
    warnings: tuple[str, ...]
    """Why the summarizer's score may differ from mltrain's."""
    summarizer_minutes: float | None
    """The score mlperf_logging's result summarizer computes for the exported folder."""


def export_run(
    run: StoredRun,
    root: Path,
    *,
    official_drop_per_end: int,
    system_name: str | None = None,
    submitter: str = "mltrain",
    ruleset: str | None = None,
    system: dict | None = None,
) -> Export:
    """Write the run's finished seeds and its system description under ``root`` (``system``: the
    capture to describe, default the one in the run's manifest; ``official_drop_per_end``: what
    the benchmark's MLPerf rules drop at each end, from its workload.yaml)."""
    manifest = run.manifest
    benchmark = manifest.benchmark or ""
    if not benchmark:
        raise UsageError(f"run {run.run_id} names no MLPerf benchmark in its manifest")
    ruleset = ruleset or DEFAULT_RULESET
    system = system or manifest.system
    name = system_desc.safe_name(system_name) if system_name else system_desc.default_system_name(system)
    benchmark_dir = root / "results" / name / benchmark
    existing = sorted(benchmark_dir.glob("result_*.txt")) if benchmark_dir.is_dir() else []
    if existing:
        raise UsageError(f"{benchmark_dir} already holds {len(existing)} result files: export into an empty folder")
    warnings = list(_rule_warnings(manifest, official_drop_per_end))
    division = "closed" if manifest.profile == "mlperf" else "open"
    description = system_desc.system_description(system, submitter=submitter, system_name=name, division=division)
    system_file = root / "systems" / f"{name}.json"
    system_desc.write_system_description(system_file, description)
    valid, log = system_desc.check_system_description(system_file)
    if not valid:
        raise UsageError(f"{system_file}: rejected by system_desc_checker: {log}")
    if not system:
        warnings.append("the run's manifest holds no system capture: the description says 'unknown'")
    files: list[tuple[int, Path]] = []
    outputs = [(seed, run.paths.seed(seed).output) for seed in run.finished_records()]
    for index, (seed, output) in enumerate((s, o) for s, o in outputs if o.is_file()):
        lines = mllog_lines(output.read_text(errors="replace"))
        if not lines:
            warnings.append(f"seed {seed}: no MLLOG lines in {output}; not exported")
            continue
        path = benchmark_dir / f"result_{index}.txt"
        atomic.write_text(path, "\n".join(lines) + "\n")
        files.append((seed, path))
    if not files:
        raise UsageError(f"run {run.run_id} has no finished seed with MLLOG output to export")
    accepted, score = _summarize(benchmark_dir, name, benchmark, ruleset)
    written = []
    for seed_number, path in files:
        # The summarizer scores only files that pass the compliance checker; ask the checker why
        # about the others.
        compliant, messages = (True, ()) if str(path) in accepted else check_compliance(path, ruleset)
        written.append(ResultFile(seed=seed_number, path=path, compliant=compliant, messages=messages))
    failing = [r.seed for r in written if not r.compliant]
    if failing:
        warnings.append(
            f"{len(failing)} result file(s) fail the {ruleset} compliance checker"
            f" (seeds {', '.join(map(str, failing))}); the summarizer counts them as non-converged runs"
        )
    return Export(root=root, system_name=name, benchmark=benchmark, ruleset=ruleset, system_file=system_file,
                  results=tuple(written), warnings=tuple(warnings), summarizer_minutes=score)


def _rule_warnings(manifest: Manifest, official_drop_per_end: int) -> Iterator[str]:
    drop = manifest.rule.drop_per_end
    if drop != official_drop_per_end:
        yield (f"this run is scored dropping {drop} per end ({manifest.profile} profile); the MLPerf"
               f" summarizer drops {official_drop_per_end} for {manifest.benchmark}, so its score differs")


def check_compliance(path: Path, ruleset: str) -> tuple[bool, tuple[str, ...]]:
    """Run mlperf_logging's compliance checker on one result file, collecting what it logs."""
    from mlperf_logging.compliance_checker import mlp_compliance

    checker = mlp_compliance.make_checker(usage=USAGE, ruleset=ruleset, quiet=True, werror=False)
    with _quiet_logging():
        valid, _, _, _ = mlp_compliance.main(str(path), f"{USAGE}_{ruleset}/common.yaml", checker)
    messages = [*checker.overwritable.values(), *checker.not_overwritable]
    return bool(valid), tuple(" ".join(str(m).split())[:300] for m in messages[:5])


def _summarize(folder: Path, system: str, benchmark: str, ruleset: str) -> tuple[set[str], float | None]:
    """Score one benchmark folder with the summarizer itself; return the files it accepted and the score.
    (Its `compute_score` command line crashes in 4.1.68; this function is what that command wraps.)"""
    from mlperf_logging.result_summarizer import result_summarizer

    with _quiet_logging(), contextlib.redirect_stdout(io.StringIO()):
        accepted, _, score, _, _ = result_summarizer._compute_strong_score_standalone(
            benchmark, system, False, str(folder), USAGE, ruleset, return_full_scores=True,
        )
    return set(accepted), score


@contextlib.contextmanager
def _quiet_logging() -> Iterator[None]:
    """mlperf_logging reports through the root logger; keep that off the user's terminal."""
    root = logging.getLogger()
    handler = logging.NullHandler()
    root.addHandler(handler)
    try:
        yield
    finally:
        root.removeHandler(handler)
