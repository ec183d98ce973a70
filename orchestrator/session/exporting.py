"""`mltrain export RUN --mlcommons DIR` of a training run: the MLCommons layout written (the run's
system described now where it ran here and holds no capture), then the summarizer's score set beside
mltrain's of the same logs by the same rule (MLPerf's), and the exit status that follows."""

from __future__ import annotations

import socket
from dataclasses import dataclass
from pathlib import Path

from orchestrator.insight import sysinfo
from orchestrator.mlperf import export as exporting
from orchestrator.mlperf import parity
from orchestrator.results.records import Score, ScoringRule
from orchestrator.results.stored_run import StoredRun
from orchestrator.session.scoring import exit_code, score_run


@dataclass(frozen=True, kw_only=True)
class TrainingExport:
    written: exporting.Export
    described_now: bool
    """The run held no system capture and ran on this host: this host was described now."""
    rule: ScoringRule
    """MLPerf's rule for the benchmark (the summarizer's)."""
    ours: float | None
    """mltrain's score of the same logs by that rule, in minutes."""
    same: bool
    """The summarizer's score and ours agree."""
    score: Score
    """The run's own score, by its profile's rule."""
    code: int
    """The exit status: `mltrain score`'s of the run, else 1 where the scores differ."""


def export_training(stored: StoredRun, folder: Path, *, system_name: str | None, submitter: str,
                    ruleset: str | None) -> TrainingExport:
    manifest = stored.manifest
    system = manifest.system
    described_now = not system and manifest.imported is None and manifest.host == socket.gethostname()
    if described_now:
        system = sysinfo.capture(Path(manifest.data_dir) if manifest.data_dir else None)
    verdict = stored.summary.mlcommons if stored.summary else None
    written = exporting.export_run(stored, folder, system_name=system_name, submitter=submitter, ruleset=ruleset,
                                   system=system,
                                   scaling_factor=verdict.scaling_factor if verdict and not manifest.imported else None)
    rule, ours = parity.by_summarizer_rule(stored.finished_records(), written.benchmark, written.scaling_factor or 1.0)
    same = parity.agrees(written.summarizer_minutes, ours)
    score = score_run(stored)
    return TrainingExport(written=written, described_now=described_now, rule=rule, ours=ours, same=same, score=score,
                          code=exit_code(stored, score) or (0 if same else 1))
