"""Export a run in the MLCommons results layout, so that mlperf_logging's tools read it directly:

    <DIR>/systems/<system>.json                       system description (system_desc_checker passes)
    <DIR>/results/<system>/<benchmark>/result_<n>.txt one per finished seed: its :::MLLOG lines
    <DIR>/results/<system>/<benchmark>/scaling.json   the RCP scaling factor, when there is one
    <DIR>/results/<system>/<benchmark>/mltrain.json   the run they came from: its profile, target and
                                                      rule (`ExportedRun`), which `mltrain import` reads
                                                      back (MLCommons' tools ignore it)

Everything is checked before anything is written (the ruleset, the benchmark name the folders are
made from, that the target stays inside DIR); the files are then made in a staging folder inside
DIR and moved into place whole. The division in the system description is the one the logs state.
The folder is scored with the summarizer itself (`Export.summarizer_minutes`); it runs the
ruleset's compliance checker on each file first and counts a file that fails it as a
non-converged run; for those files the checker is run again to say why.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from orchestrator.config.profiles import MLPERF
from orchestrator.config.reading import read_json
from orchestrator.errors import UsageError
from orchestrator.mlperf import benchmarks, checkers, system_desc
from orchestrator.mlperf.mllog import mllog_lines
from orchestrator.results import atomic
from orchestrator.results.records import ExportedRun, Manifest, RunRecord
from orchestrator.results.stored_run import StoredRun

USAGE = checkers.USAGE


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
    division: str
    """What the system description says: the division the logs state."""
    system_file: Path
    results: tuple[ResultFile, ...]
    scaling_factor: float | None
    """Written to scaling.json; None: no scaling.json."""
    warnings: tuple[str, ...]
    """Why the summarizer's score may differ from mltrain's."""
    summarizer_minutes: float | None
    """The score mlperf_logging's result summarizer computes for the exported folder."""


def logged_division(records: dict[int, RunRecord]) -> tuple[str | None, str]:
    """The division the runs' logs state, and a note when they disagree or say nothing: ``closed``
    only when every run logged closed; any ``open`` run makes the set open."""
    logged = Counter(r.division for r in records.values())
    if not records or set(logged) == {None}:
        return None, "no run logged submission_division"
    if set(logged) == {"closed"}:
        return "closed", ""
    reasons = sorted({r.division_reason for r in records.values() if r.division == "open" and r.division_reason})
    note = "" if set(logged) == {"open"} else f"the logs disagree on the division ({dict(logged)}): open"
    return "open", "; ".join(x for x in (note, *reasons[:2]) if x)


def export_run(
    run: StoredRun,
    root: Path,
    *,
    system_name: str | None = None,
    submitter: str = "mltrain",
    ruleset: str | None = None,
    system: dict | None = None,
    scaling_factor: float | None = None,
) -> Export:
    """Write the run's finished seeds and its system description under ``root`` (``system``: the
    capture to describe, default the one in the run's manifest; ``ruleset``: default the one the run
    was checked under; ``scaling_factor``: the RCP scaling factor to write into scaling.json, default
    an imported run's own)."""
    manifest = run.manifest
    benchmark = _benchmark(run)
    ruleset = benchmarks.check_ruleset(ruleset, benchmark) if ruleset else run_ruleset(manifest, benchmark)
    imported = manifest.imported
    given = system_name or (imported.system if imported is not None else None)
    name = system_desc.safe_name(given) if given else system_desc.default_system_name(system or manifest.system)
    benchmark_dir = _inside(root, root / "results" / name / benchmark)
    system_file = _inside(root, root / "systems" / f"{name}.json")
    existing = sorted(benchmark_dir.glob("result_*.txt")) if benchmark_dir.is_dir() else []
    if existing:
        raise UsageError(f"{benchmark_dir} already holds {len(existing)} result files: export into an empty folder")
    if root.exists() and not root.is_dir():
        raise UsageError(f"--mlcommons {root}: not a folder")
    logs = [(seed, run.paths.seed(seed).output) for seed in run.finished_records()]
    texts = [(seed, mllog_lines(path.read_text(errors="replace"))) for seed, path in logs if path.is_file()]
    warnings: list[str] = []  # a profile's own rule is said beside the summarizer's score, not warned of
    warnings += [f"seed {seed}: no MLLOG lines in its output; not exported" for seed, lines in texts if not lines]
    texts = [(seed, lines) for seed, lines in texts if lines]
    if not texts:
        raise UsageError(f"run {run.run_id} has no finished seed with MLLOG output to export")
    division, note = logged_division(run.finished_records())
    if division is None:
        division = "closed" if manifest.profile == MLPERF else "open"
        warnings.append(f"{note}: the system description says {division} ({manifest.profile} profile)")
    elif note:
        warnings.append(f"division {division}: {note}")
    description = _description(run, system or manifest.system, submitter=submitter, name=name, division=division,
                               ruleset=ruleset, warnings=warnings)
    if system_file.is_file() and _json_or_none(system_file) != description:
        raise UsageError(f"{system_file} already exists and describes the system otherwise: remove it, name another"
                         " --system-name, or export into an empty folder")
    factor = scaling_factor if scaling_factor is not None else (imported.scaling_factor if imported else None)

    root.mkdir(parents=True, exist_ok=True)
    with _staging(root) as stage:
        staged_dir = stage / "results" / name / benchmark
        files = []
        for index, (seed, lines) in enumerate(texts):
            atomic.write_text(staged_dir / f"result_{index}.txt", "\n".join(lines) + "\n")
            files.append((seed, benchmark_dir / f"result_{index}.txt"))
        if factor is not None and factor != 1.0:
            atomic.write_json(staged_dir / "scaling.json", {"scaling_factor": factor})
        atomic.write_json(staged_dir / EXPORTED_RUN, exported_run(run, [seed for seed, _ in files]).to_json())
        system_desc.write_system_description(stage / "systems" / f"{name}.json", description)
        benchmark_dir.parent.mkdir(parents=True, exist_ok=True)
        system_file.parent.mkdir(parents=True, exist_ok=True)
        if benchmark_dir.exists():
            benchmark_dir.rmdir()  # an empty leftover (no result files, checked above)
        atomic.move(staged_dir, benchmark_dir)
        atomic.move(stage / "systems" / f"{name}.json", system_file)
    try:
        accepted, score = _summarize(benchmark_dir, benchmark, ruleset)
    except checkers.ToolFailed as exc:
        accepted, score = set(), None
        warnings.append(str(exc))
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
    return Export(root=root, system_name=name, benchmark=benchmark, ruleset=ruleset, division=division,
                  system_file=system_file, results=tuple(written), scaling_factor=factor if factor != 1.0 else None,
                  warnings=tuple(warnings), summarizer_minutes=score)


EXPORTED_RUN = "mltrain.json"
"""Beside the result files: the run they came from (`ExportedRun`)."""


def exported_run(run: StoredRun, seeds: list[int]) -> ExportedRun:
    """What an export says of its run: ``seeds`` in the order of the result files."""
    from orchestrator import __version__

    m = run.manifest
    return ExportedRun(run_id=run.run_id, workload=m.workload, profile=m.profile, metric=m.metric, target=m.target,
                       rule=m.rule, seeds=dict(enumerate(seeds)), mltrain=__version__)


def run_ruleset(manifest: Manifest, benchmark: str) -> str:
    """The ruleset a run was checked under: the one its manifest records (an import's own), else
    (runs recorded before it was kept) its benchmark's default, under which they were checked."""
    recorded = manifest.ruleset or (manifest.imported.ruleset if manifest.imported is not None else None)
    return benchmarks.ruleset_for(benchmark, recorded)


def _json_or_none(path: Path) -> object:
    try:
        return read_json(path)
    except (OSError, ValueError):
        return None


def _benchmark(run: StoredRun) -> str:
    benchmark = run.manifest.benchmark or ""
    if not benchmark:
        raise UsageError(f"run {run.run_id} names no MLPerf benchmark in its manifest")
    if not benchmarks.is_known(benchmark):
        raise UsageError(f"{run.paths.manifest}: field benchmark {benchmark[:40]!r} is not an MLPerf training"
                         " benchmark name; repair the manifest")
    return benchmark


def _inside(root: Path, path: Path) -> Path:
    """``path``, which must stay inside ``root`` once resolved (links followed)."""
    base = root.resolve()
    if not path.resolve().is_relative_to(base):
        raise UsageError(f"export target {path} leaves {root}; refusing to write outside it")
    return path


def _description(run: StoredRun, system: dict, *, submitter: str, name: str, division: str, ruleset: str,
                 warnings: list[str]) -> dict:
    """Ours from the system capture, checked by system_desc_checker; an imported run's own as it was
    published (with the division its logs state)."""
    imported = run.manifest.imported
    if imported is not None and imported.system_description:
        return {**{k: v if isinstance(v, str) else json.dumps(v) for k, v in imported.system_description.items()},
                "division": division}
    description = system_desc.system_description(system, submitter=submitter, system_name=name, division=division)
    with tempfile.TemporaryDirectory(prefix="mltrain-sysdesc-") as tmp:
        probe = Path(tmp) / f"{name}.json"
        system_desc.write_system_description(probe, description)
        valid, log = system_desc.check_system_description(probe, ruleset)
    if not valid:
        raise UsageError(f"system description of {name}: rejected by system_desc_checker: {log}")
    if not system:
        warnings.append("the run's manifest holds no system capture: the description says 'unknown'")
    return description


@contextlib.contextmanager
def _staging(root: Path) -> Iterator[Path]:
    """A folder inside ``root`` to build the export in; removed whatever happens."""
    folder = Path(tempfile.mkdtemp(prefix=".mltrain-export-", dir=root))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def check_compliance(path: Path, ruleset: str) -> tuple[bool, tuple[str, ...]]:
    """mlperf_logging's compliance checker on one result file: its verdict and first messages."""
    report = checkers.compliance(path, ruleset)
    return report.valid, report.errors[:5]


def _summarize(folder: Path, benchmark: str, ruleset: str) -> tuple[set[str], float | None]:
    """Score one benchmark folder with the summarizer itself; return the files it accepted and the score."""
    score, accepted, _ = checkers.summarizer_score(folder, benchmark, ruleset)
    return set(accepted), score
