"""A stored run scored: its finished seeds by the run's own rule (`mlperf.scoring.score_runs`), the
summary that score makes, the seeds an infrastructure fault ended, and the exit status the result
gives a command. Used when a run finishes (`session.loop.finish`), by `mltrain score` and `show`,
and for a run imported from logs."""

from __future__ import annotations

from orchestrator.errors import EXIT_INFRASTRUCTURE, EXIT_INVALID_RESULT, EXIT_OK
from orchestrator.mlperf.scoring import score_runs
from orchestrator.results.records import INFRASTRUCTURE_FAULTS, MlcommonsCheck, Score, Summary
from orchestrator.results.stored_run import StoredRun


def score_run(run: StoredRun, mlcommons: MlcommonsCheck | None = None) -> Score:
    """Score the seeds that finished by the run's own rule, with the RCP scaling factor MLCommons
    applies (from ``mlcommons``, else the run's stored verdict)."""
    verdict = mlcommons or (run.summary.mlcommons if run.summary else None)
    return score_runs(run.finished_records(), run.manifest.rule, unfinished=run.unfinished_seeds(),
                      scaling_factor=verdict.scaling_factor if verdict else 1.0)


def summary_of(run: StoredRun, score: Score, mlcommons: MlcommonsCheck | None = None) -> Summary:
    m = run.manifest
    return Summary(
        **score.model_dump(), run_id=run.run_id, workload=m.workload, benchmark=m.benchmark, profile=m.profile,
        mlperf_result=m.mlperf_result, label=m.label, target=m.target, mlcommons=mlcommons,
        cuts=tuple(dict.fromkeys(r.cuts for r in run.finished_records().values() if r.cuts)),
    )


def rescore(run: StoredRun) -> tuple[Summary, Score]:
    """Score a stored run again; the MLCommons verdict the stored summary holds is kept."""
    score = score_run(run)
    return summary_of(run, score, run.summary.mlcommons if run.summary else None), score


def failed_runs(run: StoredRun) -> list[int]:
    """Finished seeds whose run an infrastructure fault ended, rather than a slow or unlucky run."""
    return [s for s, r in run.finished_records().items() if r.status in INFRASTRUCTURE_FAULTS]


def exit_code(run: StoredRun, score: Score) -> int:
    """0 a valid result; 3 an infrastructure fault kept a seed from being measured; 1 the result is invalid."""
    if failed_runs(run):
        return EXIT_INFRASTRUCTURE
    return EXIT_OK if score.valid else EXIT_INVALID_RESULT
