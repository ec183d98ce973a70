"""The full suite's time-to-train check: one seed of the workload under a seeds.yaml profile, run
and scored by `mltrain run`'s own loop (`session.loop.run_benchmark`), kept as an ordinary run in
the results folder. Weekly, not nightly: one system's time-to-train varies by ~30 % run to run in
the published unet3d results, its per-step throughput by ~2.6 %.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.config.profiles import Profiles
from orchestrator.config.seedspec import SeedSpec
from orchestrator.config.workloads import Workload
from orchestrator.errors import MltrainError
from orchestrator.results.qualification import CheckResult, Measurement, Status
from orchestrator.results.records import INFRASTRUCTURE_FAULTS, ScoringRule
from orchestrator.results.store import Store
from orchestrator.runners.base import Runner

if TYPE_CHECKING:
    from orchestrator.qualify.checks.time_to_train import TimeToTrainSpec


def time_to_train_check(
    runner: Runner, *, workload: Workload, profiles: Profiles, spec: TimeToTrainSpec, store: Store,
    data: Path | None, status: Callable[[str], None] = lambda line: None,
) -> tuple[CheckResult, str | None]:
    """(the check, the stored run's id)."""
    from orchestrator.session.loop import Watch, run_benchmark
    from orchestrator.session.plan import BenchmarkPlan, plan_new

    started = time.monotonic()

    def result(check_status: Status, reasons: list[str], **extra: object) -> CheckResult:
        return CheckResult(name="time_to_train", kind="time_to_train", status=check_status, sanity=check_status,
                           reasons=tuple(reasons), sanity_reasons=tuple(reasons),
                           duration_s=time.monotonic() - started, **extra)  # type: ignore[arg-type]

    try:
        plan = plan_new(workload, profiles, seeds=SeedSpec(listed=(spec.seed,), text=str(spec.seed)),
                        profile=spec.profile, data=data,
                        label="qualify-time-to-train")
        one_seed = plan.profile.model_copy(update={"drop_per_end": 0, "max_non_converged": 0, "runs": None})
        plan = BenchmarkPlan(**{**plan.__dict__, "profile": one_seed})
        stored, score = run_benchmark(plan, runner, store, Watch(status=status))
    except MltrainError as exc:
        return result(Status.INCONCLUSIVE, [f"could not run the time-to-train seed: {exc}"]), None
    record = stored.records.get(spec.seed)
    facts = {"run_id": stored.run_id, "profile": spec.profile, "rule": ScoringRule(
        drop_per_end=0, max_non_converged=0).model_dump()}
    if record is None:
        return result(Status.INCONCLUSIVE, ["the time-to-train seed left no record"], facts=facts), stored.run_id
    facts["status"] = record.status.value
    if not record.converged or score.score_ms is None:
        kind = Status.FAIL if record.status in INFRASTRUCTURE_FAULTS else Status.WARN
        why = f"seed {spec.seed} {record.status.value}: {record.reason} (run {stored.run_id})"
        return result(kind, [why], facts=facts), stored.run_id
    measurements = (Measurement(metric="time_to_train_s", value=score.score_ms / 1000, unit="s", better="lower",
                                detail=f"seed {spec.seed}, {record.epochs_to_target} epochs, profile {spec.profile}"),)
    return result(Status.PASS, [], measurements=measurements, facts=facts), stored.run_id
