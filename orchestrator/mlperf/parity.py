"""Does mltrain's score equal what MLCommons' tools make of the same logs?

The check always reads the run's SOURCE, never only mltrain's re-export of it:

- an imported run: the result summarizer on the original folder (with its ``scaling.json``); NVIDIA
  log names are copied to ``result_<n>.txt`` first, the only name the summarizer reads;
- a run of ours: the seeds' own logs (copies of each ``output.log``, byte for byte), on which the
  RCP checker runs first as the package checker would (closed division only), writing
  ``scaling.json`` when MLCommons would scale the score; then the summarizer. The run is then
  exported (with that ``scaling.json``) and the package checker's verdict on the export is kept.

Agreement: mltrain's olympic mean by the summarizer's rule (MLPerf's for the benchmark: unet3d drops
4 per end, whatever profile made the run) x the same scaling factor equals the summarizer's score to
1e-9 relative. Both numbers are kept (`MlcommonsCheck.summarizer_score_min`, `mltrain_score_min`), so
that what was compared is always shown; a run whose profile scores by another rule (smoke drops 1)
keeps its own score beside them.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from orchestrator.errors import MltrainError
from orchestrator.mlperf import benchmarks, checkers, export
from orchestrator.mlperf.layout import RESULT_FILE
from orchestrator.mlperf.scoring import score_runs
from orchestrator.results.records import MlcommonsCheck, PackageCheck, RcpCheck, RunRecord, ScoringRule
from orchestrator.results.stored_run import StoredRun
from orchestrator.units import minutes

RELATIVE_TOLERANCE = 1e-9
EXPORT_FOLDER = "mlcommons"
"""The export of an mlperf-profile run, inside its run folder."""


def agrees(theirs_min: float | None, ours_min: float | None) -> bool:
    if theirs_min is None or ours_min is None:
        return theirs_min is None and ours_min is None
    return abs(theirs_min - ours_min) <= RELATIVE_TOLERANCE * max(abs(theirs_min), abs(ours_min), 1e-300)


def check(run: StoredRun) -> MlcommonsCheck:
    """MLCommons' verdict on a finished mlperf-profile run or an import (see the module docstring)."""
    if run.manifest.imported is not None:
        return _check_import(run)
    try:
        ruleset = export.run_ruleset(run.manifest, run.manifest.benchmark or "")
    except MltrainError as exc:
        return MlcommonsCheck(folder="", ruleset=run.manifest.ruleset or "", summarizer_score_min=None, agrees=False,
                              warnings=(f"MLCommons' tools were not run: {exc}",))
    return _check_own_run(run, ruleset)


def _check_import(run: StoredRun) -> MlcommonsCheck:
    imported = run.manifest.imported
    assert imported is not None
    benchmark = run.manifest.benchmark or ""
    records = run.finished_records()
    folder = Path(imported.folder)
    renamed = any(not RESULT_FILE.match(name) for name in imported.files.values())
    failures: list[str] = []
    with _source_copy(run, records, renamed) as source:
        theirs, accepted, factor = _summarizer(source, benchmark, imported.ruleset, failures)
        accepted_names = {Path(p).name for p in accepted}
    what = (f"copies of the original files of {folder} named result_<n>.txt (the summarizer reads only that name)"
            if renamed else f"the original folder {folder}")
    rule, ours = by_summarizer_rule(records, benchmark, factor)
    division, _ = export.logged_division(records)
    warnings = failures + _file_differences(records, imported.files, accepted_names, renamed)
    return MlcommonsCheck(
        folder=str(folder), ruleset=imported.ruleset, summarizer_score_min=theirs,
        agrees=agrees(theirs, ours), warnings=tuple(warnings), source=what,
        scaling_factor=factor, scaling_source=f"scaling.json in {folder}" if imported.scaling_factor else "",
        division=division, rule=rule, mltrain_score_min=ours,
    )


def by_summarizer_rule(records: dict[int, RunRecord], benchmark: str, factor: float = 1.0
                       ) -> tuple[ScoringRule, float | None]:
    """The rule the result summarizer scores the benchmark by (MLPerf's), and mltrain's score of
    ``records`` by it in minutes, ``factor`` applied: the number to compare with the summarizer's."""
    rule = benchmarks.get(benchmark).rule()
    return rule, minutes(score_runs(records, rule, scaling_factor=factor).scaled_score_ms)


def _file_differences(records: dict[int, RunRecord], files: dict[int, str], accepted: set[str],
                      renamed: bool) -> list[str]:
    """Files the summarizer scores and mltrain does not, and the other way round, with why."""
    notes = []
    for number, record in sorted(records.items()):
        name = f"result_{number}.txt" if renamed else files.get(number, f"result_{number}.txt")
        theirs = name in accepted
        if theirs != record.converged:
            who = ("the summarizer scores it and mltrain does not" if theirs
                   else "mltrain scores it and the summarizer does not")
            notes.append(f"{files.get(number, name)}: {who} ({record.status.value}: {record.reason})")
    return notes[:10]


def _check_own_run(run: StoredRun, ruleset: str) -> MlcommonsCheck:
    benchmark = run.manifest.benchmark or ""
    records = run.finished_records()
    division, _ = export.logged_division(records)
    failures: list[str] = []
    with _source_copy(run, records) as source:
        rcp = rcp_verdict(source, records, benchmark, ruleset, division)
        theirs, _, factor = _summarizer(source, benchmark, ruleset, failures)
    rule, ours = by_summarizer_rule(records, benchmark, factor)
    folder = run.paths.root / EXPORT_FOLDER
    if folder.exists():
        shutil.rmtree(folder)
    warnings = list(failures)
    package = None
    try:
        exported = export.export_run(run, folder, ruleset=ruleset, scaling_factor=factor)
    except MltrainError as exc:  # the run keeps its score; the export and the package check say why not
        warnings.append(f"not exported: {exc}")
    else:
        passed, errors = checkers.package_check(folder, ruleset)
        package = PackageCheck(passed=passed, errors=errors)
        warnings += exported.warnings
        if not agrees(exported.summarizer_minutes, theirs):
            warnings.append(f"the summarizer scores the export {exported.summarizer_minutes} min and the seeds'"
                            f" own logs {theirs} min")
    return MlcommonsCheck(
        folder=str(folder), ruleset=ruleset, summarizer_score_min=theirs, agrees=agrees(theirs, ours),
        warnings=tuple(warnings), source="copies of the seeds' own logs (output.log of each seed)",
        scaling_factor=factor, scaling_source="the RCP checker" if factor != 1.0 else "", division=division,
        rcp=rcp, package=package, rule=rule, mltrain_score_min=ours,
    )


def _summarizer(folder: Path, benchmark: str, ruleset: str, failures: list[str]) -> tuple[float | None, dict, float]:
    """`checkers.summarizer_score`; where the summarizer itself raises: no score, the scaling.json
    factor as it reads it, and why in ``failures``."""
    try:
        return checkers.summarizer_score(folder, benchmark, ruleset)
    except checkers.ToolFailed as exc:
        failures.append(str(exc))
        return None, {}, checkers.scaling_factor(folder) or 1.0


@contextmanager
def _source_copy(run: StoredRun, records: dict[int, RunRecord], renamed: bool = False) -> Iterator[Path]:
    """The folder the summarizer reads: an import's original folder as it is, or a temporary
    ``<benchmark>/`` of byte-for-byte copies named ``result_<n>.txt``: an import's files under
    NVIDIA names (with its scaling.json), or the seeds' own logs of a run of ours."""
    imported = run.manifest.imported
    if imported is not None and not renamed:
        yield Path(imported.folder)
        return
    with tempfile.TemporaryDirectory(prefix=".mltrain-source-", dir=run.paths.root) as tmp:
        folder = Path(tmp) / "system" / (run.manifest.benchmark or "benchmark")
        folder.mkdir(parents=True)
        if imported is not None:
            originals = Path(imported.folder)
            for number, name in imported.files.items():
                shutil.copyfile(originals / name, folder / f"result_{number}.txt")
            if (originals / "scaling.json").is_file():
                shutil.copyfile(originals / "scaling.json", folder / "scaling.json")
        else:
            for index, seed in enumerate(sorted(records)):
                output = run.paths.seed(seed).output
                if output.is_file():
                    shutil.copyfile(output, folder / f"result_{index}.txt")
        yield folder


def rcp_verdict(folder: Path, records: dict[int, RunRecord], benchmark: str, ruleset: str,
                division: str | None) -> RcpCheck:
    """mlperf_logging's RCP checker on the seeds' logs, said plainly. It runs on closed-division
    results only, as MLCommons runs it; it writes ``scaling.json`` into ``folder`` when the runs
    converge faster than the RCP mean but within the allowed speedup."""
    batch = _batch_size(records)
    sizes, table_counts_samples = checkers.rcp_table(benchmark, ruleset)
    table = f"the training {ruleset} {benchmark} RCP table"
    if division != "closed":
        return RcpCheck(state="not_applied", batch_size=batch, table_batch_sizes=sizes,
                        detail=f"not applied: the logs state the {division or 'unknown'} division and MLCommons"
                               " checks RCPs of closed-division results only")
    outcome = checkers.rcp_check(folder, benchmark, ruleset)
    logs_count_samples = all(r.metadata.get("epoch_unit") == "samples" for r in records.values() if r.converged)
    no_point = batch is not None and batch not in outcome.table_batch_sizes and outcome.message != "RCP Interpolation"
    have = f"it has batch sizes {', '.join(map(str, outcome.table_batch_sizes)) or 'none'}"
    common = {"batch_size": batch, "table_batch_sizes": outcome.table_batch_sizes, "checker_message": outcome.message}
    if outcome.table_batch_sizes and outcome.counts_samples != logs_count_samples:
        (folder / "scaling.json").unlink(missing_ok=True)  # a comparison across units decides nothing
        units = ("samples", "epochs") if outcome.counts_samples else ("epochs", "samples")
        extra = f"; and there is no RCP for batch size {batch} ({have})" if no_point else ""
        return RcpCheck(state="not_comparable", **common,
                        detail=f"not comparable: {table} counts {units[0]} to converge and these logs count"
                               f" {units[1]}, so the RCP check says nothing; no scaling applied{extra}")
    if not outcome.table_batch_sizes:
        return RcpCheck(state="no_rcp", **common, detail=f"no RCP: {table} is missing or empty")
    if no_point:
        verdict = "passes" if outcome.passed else "fails"
        scaled = f"; MLCommons scales the score by {outcome.factor:.6g}" if outcome.factor != 1.0 else ""
        return RcpCheck(state="no_rcp", **common, scaling_factor=outcome.factor,
                        detail=f"no RCP for batch size {batch} in {table} ({have}); the checker {verdict}:"
                               f" {outcome.message}{scaled}")
    if outcome.passed:
        scaled = f"; MLCommons scales the score by {outcome.factor:.6g}" if outcome.factor != 1.0 else ""
        return RcpCheck(state="pass", **common, scaling_factor=outcome.factor,
                        detail=f"passed ({outcome.message}, batch size {batch}){scaled}")
    return RcpCheck(state="fail", **common,
                    detail=f"FAILED: the runs converge faster than {table} allows for batch size {batch}"
                           f" ({outcome.message}); MLCommons would reject this result")


def _batch_size(records: dict[int, RunRecord]) -> int | None:
    sizes = {r.global_batch_size for r in records.values() if r.global_batch_size}
    return sizes.pop() if len(sizes) == 1 else None
