"""time_to_train: the full suite's one seed of the workload under a seeds.yaml profile, run and scored
by `mltrain run`'s own loop (`qualify.time_to_train`), kept as an ordinary run. Its timeout is the
profile's own wall-clock limit per seed; it is never repeated (one seed varies by ~30 % run to run)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from orchestrator.config.profiles import ProfileName
from orchestrator.qualify.checks.base import result
from orchestrator.qualify.checks.declaration import Declaration, Remedies
from orchestrator.results.qualification import CheckResult, Remedy, Status
from orchestrator.results.store import Store

if TYPE_CHECKING:
    from orchestrator.qualify.checks.context import NodeContext


class TimeToTrainSpec(BaseModel):
    """The suite's ``time_to_train:`` (a setting of the suite itself, not per kind of device): no
    timeout of its own, the profile's wall-clock limit per seed is its timeout."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid", allow_inf_nan=False)

    profile: ProfileName = "smoke"
    """The seeds.yaml profile of the workload that the seed runs under (target, env, data)."""
    seed: int = Field(default=1, ge=0)


class TimeToTrainCheck:
    declaration = Declaration(
        name="time_to_train", kind="time_to_train", runs="job", phase="after", settings_at="suite",
        settings=TimeToTrainSpec, sanity="the seed converges to the profile's target; a crash is a FAIL",
        units={"time_to_train_s": "s"},
        sane={"time_to_train_s": (0, 1e8)}, timeout_s=24 * 3600,
        remedies=Remedies(wrong=Remedy.INVESTIGATE, slow=Remedy.INVESTIGATE),
    )

    def run(self, ctx: NodeContext) -> CheckResult:
        from orchestrator.qualify.time_to_train import time_to_train_check

        spec = ctx.settings(self.declaration)
        plan = ctx.plan
        if ctx.prepare_error or plan.profiles is None:
            why = ctx.prepare_error or "no profiles (seeds.yaml) to run the time-to-train seed under"
            return result(self.declaration, Status.INCONCLUSIVE, [why])
        assert isinstance(spec, TimeToTrainSpec)
        ctx.watch.status(f"time_to_train: {plan.workload.name} seed {spec.seed}, profile {spec.profile} ...")
        check, ctx.time_to_train_run = time_to_train_check(
            ctx.runner, workload=plan.workload, profiles=plan.profiles, spec=spec, store=Store(ctx.results_dir),
            data=plan.data, status=ctx.watch.detail)
        return check
