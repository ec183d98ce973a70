"""A benchmark run from start to end, in the order it happens:

    plan -> runner -> data -> manifest -> seeds -> score -> export

Data comes after the runner: the dataset commands run where the seeds run (in the workload's
image for Docker).

`run_benchmark` is that sequence, top to bottom; each step is one function below it. The plan
(`orchestrator.session.plan`) is decided before anything runs; one seed's life on a runner is
`orchestrator.session.seed.run_seed`. Resumable: a resumed plan reopens its stored run, and
finished seeds never run again.
"""

from __future__ import annotations

import shutil
import socket
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from orchestrator.errors import Interrupted
from orchestrator.insight import sysinfo
from orchestrator.insight.telemetry import TelemetrySampler
from orchestrator.mlperf import export
from orchestrator.mlperf.scoring import minutes, score_runs
from orchestrator.results.paths import SeedPaths
from orchestrator.results.records import (
    INFRASTRUCTURE_FAULTS,
    Manifest,
    MlcommonsCheck,
    Score,
    SeedState,
    SeedStateName,
    Summary,
)
from orchestrator.results.store import Store, StoredRun, new_run_id, now_iso
from orchestrator.runners.base import Runner, SeedJob
from orchestrator.session import datasets
from orchestrator.session.plan import BenchmarkPlan
from orchestrator.session.seed import SeedProgress, run_seed


@dataclass
class Watch:
    """How the caller follows a run: per-seed progress, a callback when it changes, status lines."""

    status: Callable[[str], None] = lambda _: None
    update: Callable[[], None] = lambda: None
    seeds: dict[int, SeedProgress] = field(default_factory=dict)


def run_benchmark(plan: BenchmarkPlan, runner: Runner, store: Store, watch: Watch) -> tuple[StoredRun, Score]:
    """Run every unfinished seed of the plan on ``runner`` and score the set."""
    provenance = runner.prepare(plan.workload)
    data = datasets.prepare_data(plan.workload, plan.profile, plan.data_dir, runner,
                                 synthetic=plan.makes_synthetic_data, status=watch.status)
    plan = replace(plan, data_dir=data.folder)
    run = plan.resumes or store.create(new_manifest(plan, runner.name, {**provenance, "dataset": data.provenance()}))
    if plan.resumes is not None and not run.unfinished_seeds():
        watch.status(f"run {run.run_id}: every seed has finished already; scoring it")
    watch.status(f"run {run.run_id}: {plan.workload.name}, profile {plan.profile.name}, {len(plan.seeds)} seeds,"
                 f" runner {runner.name}")
    for seed in plan.seeds:
        progress = watch.seeds.setdefault(seed, SeedProgress(seed=seed))
        state = run.states.get(seed)
        if state is not None and state.finished:
            progress.state, progress.status = "finished", state.status.value if state.status else ""
    for seed in run.unfinished_seeds():
        run_one_seed(run, seed, plan, runner, watch)
    return finish(run, plan.workload.olympic.drop_per_end)


def new_manifest(plan: BenchmarkPlan, runner: str, provenance: dict[str, Any]) -> Manifest:
    return Manifest(
        run_id=new_run_id(plan.workload.name, plan.profile.name),
        workload=plan.workload.name,
        benchmark=plan.workload.mlperf_benchmark,
        profile=plan.profile.name,  # type: ignore[arg-type]  # validated by the profile file
        mlperf_result=plan.profile.is_mlperf,
        label=plan.label,
        seeds=plan.seeds,
        seeds_random=plan.seeds_random,
        runner=runner,
        metric=plan.workload.quality.metric,
        target=plan.target,
        rule=plan.rule,
        timeout_minutes=plan.profile.timeout_minutes,
        data_dir=str(plan.data_dir),
        env=plan.seed_env(),
        host=socket.gethostname(),
        command=(Path(sys.argv[0]).name, *sys.argv[1:]),
        started_at=now_iso(),
        state="running",
        versions=sysinfo.orchestrator_versions(),
        system=sysinfo.capture(plan.data_dir),
        runner_provenance=provenance,
    )


def run_one_seed(run: StoredRun, seed: int, plan: BenchmarkPlan, runner: Runner, watch: Watch) -> None:
    """Run one seed to its end and record it; on Ctrl-C record it interrupted and stop the run."""
    paths = run.paths.seed(seed)
    archive_attempt(paths)
    started_at = now_iso()
    run.save_seed(SeedState(seed=seed, state=SeedStateName.RUNNING, started_at=started_at))
    job = SeedJob(
        run_id=run.run_id, seed=seed, workload=plan.workload, data_dir=plan.data_dir, results_dir=paths.results,
        env=plan.seed_env(),
        labels={"mltrain.run_id": run.run_id, "mltrain.seed": str(seed), "mltrain.workload": plan.workload.name},
    )
    try:
        with TelemetrySampler(paths.telemetry, plan.data_dir, gpus=runner.sampled_gpus):
            record = run_seed(
                runner, job, paths, timeout_s=plan.profile.timeout_minutes * 60, target=plan.target,
                metric=plan.workload.quality.metric, progress=watch.seeds[seed], on_update=watch.update,
            )
    except KeyboardInterrupt:
        run.save_seed(SeedState(seed=seed, state=SeedStateName.INTERRUPTED, started_at=started_at,
                                ended_at=now_iso()))
        run.save_manifest(run.manifest.model_copy(update={"state": "interrupted", "ended_at": now_iso()}))
        raise Interrupted(
            f"interrupted: finished seeds are kept; complete the set with"
            f" `mltrain run {plan.workload.name} --resume {run.run_id}`"
        ) from None
    run.save_seed(SeedState(seed=seed, state=SeedStateName.FINISHED, status=record.status, started_at=started_at,
                            ended_at=now_iso()), record)


def archive_attempt(seed: SeedPaths) -> None:
    """Move what an unfinished attempt of a seed left into ``attempt-N/``, so that nothing is
    lost and the rerun starts clean."""
    leftovers = [p for p in (seed.output, seed.results, seed.record, seed.telemetry) if p.exists()]
    if not leftovers:
        return
    n = 1
    while (seed.root / f"attempt-{n}").exists():
        n += 1
    target = seed.root / f"attempt-{n}"
    target.mkdir()
    for path in leftovers:
        shutil.move(str(path), target / path.name)


def score_run(run: StoredRun) -> Score:
    """Score the seeds that finished by the run's own rule."""
    return score_runs(run.finished_records(), run.manifest.rule, unfinished=run.unfinished_seeds())


def summary_of(run: StoredRun, score: Score, mlcommons: MlcommonsCheck | None = None) -> Summary:
    m = run.manifest
    return Summary(
        **score.model_dump(), run_id=run.run_id, workload=m.workload, benchmark=m.benchmark, profile=m.profile,
        mlperf_result=m.mlperf_result, label=m.label, target=m.target, mlcommons=mlcommons,
    )


def rescore(run: StoredRun) -> tuple[Summary, Score]:
    """Score a stored run again; the MLCommons verdict the stored summary holds is kept."""
    score = score_run(run)
    return summary_of(run, score, run.summary.mlcommons if run.summary else None), score


def finish(run: StoredRun, official_drop_per_end: int) -> tuple[StoredRun, Score]:
    """Score the run, write its summary, close its manifest. An mlperf-profile run is also laid
    out for MLCommons' tools in ``<run>/mlcommons/``, and their own score is kept beside ours."""
    score = score_run(run)
    mlcommons = None
    if run.manifest.profile == "mlperf" and not score.unfinished:
        mlcommons = check_with_mlcommons(run, score, official_drop_per_end)
    run.save_summary(summary_of(run, score, mlcommons))
    state = "finished" if not score.unfinished else "incomplete"
    run.save_manifest(run.manifest.model_copy(update={"ended_at": now_iso(), "state": state}))
    return run, score


def check_with_mlcommons(run: StoredRun, score: Score, official_drop_per_end: int) -> MlcommonsCheck:
    folder = run.paths.root / "mlcommons"
    if folder.exists():
        shutil.rmtree(folder)
    exported = export.export_run(run, folder, official_drop_per_end=official_drop_per_end)
    theirs = exported.summarizer_minutes
    ours = minutes(score.score_ms)
    return MlcommonsCheck(
        folder=str(folder),
        ruleset=exported.ruleset,
        summarizer_score_min=theirs,
        agrees=(theirs is None and ours is None)
        or (theirs is not None and ours is not None and abs(theirs - ours) <= 1e-9 * max(1.0, ours)),
        warnings=exported.warnings,
    )


def failed_runs(run: StoredRun) -> list[int]:
    """Seeds whose run was an infrastructure failure rather than a slow or unlucky run."""
    return [s for s, r in sorted(run.records.items()) if r.status in INFRASTRUCTURE_FAULTS]
