"""A benchmark run: a workload, a profile and a set of seeds, run one after another on a runner,
kept in its results folder, and scored. Resumable: finished seeds are never run again."""

from __future__ import annotations

import platform
import shutil
import socket
import sys
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from orchestrator import __version__
from orchestrator.config.profiles import Profile
from orchestrator.config.workloads import Workload
from orchestrator.insight import runs as setups
from orchestrator.insight import sysinfo
from orchestrator.insight.telemetry import TelemetrySampler
from orchestrator.mlperf import export
from orchestrator.mlperf.scoring import Score, ScoringRule, minutes, score_runs
from orchestrator.results import store
from orchestrator.results.paths import SeedPaths
from orchestrator.results.records import RunStatus
from orchestrator.runners.base import Runner, SeedJob
from orchestrator.session.seed import SeedProgress, run_seed


@dataclass(frozen=True, kw_only=True)
class BenchmarkPlan:
    """Everything decided before the first seed runs."""

    workload: Workload
    profile: Profile
    seeds: tuple[int, ...]
    seeds_random: bool
    """Seeds were drawn from the OS (recorded in the manifest)."""
    data_dir: Path
    results_dir: Path
    label: str | None = None
    """Names the setup for comparisons (`mltrain compare --label`)."""

    @property
    def target(self) -> float:
        return self.profile.target if self.profile.target is not None else self.workload.quality.target

    @property
    def rule(self) -> ScoringRule:
        return ScoringRule(
            drop_per_end=self.profile.drop_per_end,
            max_non_converged=self.profile.max_non_converged,
            runs_required=self.profile.runs,
        )

    def seed_env(self) -> dict[str, str]:
        return {
            **self.profile.env,
            "MLTRAIN_PROFILE": self.profile.name,
            self.workload.quality.env: repr(self.target),
        }


def software_versions() -> dict[str, str]:
    versions = {"mltrain": __version__, "python": platform.python_version()}
    for package in ("mlperf-logging", "torch", "docker", "numpy"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            continue
    return versions


def new_manifest(plan: BenchmarkPlan, runner: Runner) -> dict[str, Any]:
    return {
        "run_id": store.new_run_id(plan.workload.name, plan.profile.name),
        "workload": plan.workload.name,
        "benchmark": plan.workload.mlperf_benchmark,
        "profile": plan.profile.name,
        "mlperf_result": plan.profile.is_mlperf,
        "label": plan.label,
        "seeds": list(plan.seeds),
        "seeds_random": plan.seeds_random,
        "runner": runner.name,
        "metric": plan.workload.quality.metric,
        "target": plan.target,
        "rule": {
            "drop_per_end": plan.rule.drop_per_end,
            "max_non_converged": plan.rule.max_non_converged,
            "runs_required": plan.rule.runs_required,
        },
        "timeout_minutes": plan.profile.timeout_minutes,
        "data_dir": str(plan.data_dir),
        "env": plan.seed_env(),
        "host": socket.gethostname(),
        "command": [Path(sys.argv[0]).name, *sys.argv[1:]],
        "started_at": store.now_iso(),
        "ended_at": None,
        "state": "running",
        "versions": software_versions(),
        "system": sysinfo.capture(plan.data_dir),
    }


def rule_of(manifest: dict[str, Any]) -> ScoringRule:
    return ScoringRule(**manifest["rule"])


def score_stored(run: store.StoredRun) -> Score:
    finished = {s: r for s, r in run.records.items() if run.states.get(s, {}).get("state") == store.SEED_FINISHED}
    return score_runs(finished, rule_of(run.manifest), unfinished=run.unfinished_seeds())


def rescore(run: store.StoredRun) -> tuple[dict[str, Any], Score]:
    """Score a stored run again; what the stored summary holds beyond the score (the MLCommons
    export's verdict) is kept."""
    score = score_stored(run)
    return {**(run.summary or {}), **summary_of(run, score)}, score


def summary_of(run: store.StoredRun, score: Score) -> dict[str, Any]:
    m = run.manifest
    return {
        "run_id": run.run_id,
        "workload": m["workload"],
        "benchmark": m.get("benchmark"),
        "profile": m["profile"],
        "mlperf_result": bool(m.get("mlperf_result")),
        "label": m.get("label"),
        "target": m.get("target"),
        **score.to_json(),
    }


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


def run_seeds(
    run: store.StoredRun,
    plan: BenchmarkPlan,
    runner: Runner,
    progress: dict[int, SeedProgress],
    on_update: Callable[[], None],
) -> None:
    """Run every unfinished seed of ``run`` in order; the index follows each seed."""
    results_dir = plan.results_dir
    manifest = run.manifest
    for seed in run.unfinished_seeds():
        paths = run.paths.seed(seed)
        archive_attempt(paths)
        store.write_seed_state(paths, {"seed": seed, "state": store.SEED_RUNNING, "started_at": store.now_iso()})
        store.sync_run(results_dir, run.run_id)
        job = SeedJob(
            run_id=run.run_id,
            seed=seed,
            workload=plan.workload,
            data_dir=plan.data_dir,
            results_dir=paths.results,
            env=plan.seed_env(),
            labels={"mltrain.run_id": run.run_id, "mltrain.seed": str(seed), "mltrain.workload": plan.workload.name},
        )
        started_at = store.now_iso()
        try:
            with TelemetrySampler(paths.telemetry, plan.data_dir):
                record = run_seed(
                    runner, job, paths, timeout_s=plan.profile.timeout_minutes * 60, target=plan.target,
                    metric=plan.workload.quality.metric, progress=progress[seed], on_update=on_update,
                )
        except KeyboardInterrupt:
            store.write_seed_state(
                paths, {"seed": seed, "state": store.SEED_INTERRUPTED, "started_at": started_at,
                        "ended_at": store.now_iso()}
            )
            manifest.update(state="interrupted", ended_at=store.now_iso())
            store.write_manifest(run.paths, manifest)
            store.sync_run(results_dir, run.run_id)
            raise
        store.write_record(paths, record)
        store.write_seed_state(
            paths,
            {"seed": seed, "state": store.SEED_FINISHED, "status": record.status.value, "started_at": started_at,
             "ended_at": store.now_iso()},
        )
        store.sync_run(results_dir, run.run_id)


def finish(results_dir: Path, run_id: str) -> tuple[store.StoredRun, Score]:
    """Score the run, write its summary, close its manifest. An mlperf-profile run is also laid
    out for MLCommons' tools in ``<run>/mlcommons/``, and their own score is kept beside ours."""
    run = store.open_run(results_dir, run_id)
    score = score_stored(run)
    summary = summary_of(run, score)
    if run.manifest.get("profile") == "mlperf" and not score.unfinished:
        summary["mlcommons"] = _export_for_mlcommons(results_dir, run, score)
    store.write_summary(run.paths, summary)
    manifest = dict(run.manifest, ended_at=store.now_iso(), state="finished" if not score.unfinished else "incomplete")
    store.write_manifest(run.paths, manifest)
    store.sync_run(results_dir, run_id)
    return store.open_run(results_dir, run_id), score


def _export_for_mlcommons(results_dir: Path, run: store.StoredRun, score: Score) -> dict[str, Any]:
    folder = run.paths.root / "mlcommons"
    if folder.exists():
        shutil.rmtree(folder)
    exported = export.export_run(setups.load_run(results_dir, run.run_id), folder)
    theirs = export.summarizer_score(exported)
    ours = minutes(score.score_ms)
    return {
        "folder": str(folder),
        "ruleset": exported.ruleset,
        "summarizer_score_min": theirs,
        "agrees": (theirs is None and ours is None)
        or (theirs is not None and ours is not None and abs(theirs - ours) <= 1e-9 * max(1.0, ours)),
        "warnings": list(exported.warnings),
    }


def failed_runs(run: store.StoredRun) -> list[int]:
    """Seeds whose run was an infrastructure failure rather than a slow or unlucky run."""
    faults = {RunStatus.CRASHED, RunStatus.KILLED, RunStatus.OOM, RunStatus.TIMED_OUT}
    return [s for s, r in sorted(run.records.items()) if r.status in faults]
