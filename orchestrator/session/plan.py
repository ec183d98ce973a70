"""What a benchmark run will do, decided before anything runs or is written: the workload, the
profile, the seeds, the data, the runner it runs on and the batch system's time limit, and for a
resumed run the rules that keep it what it was (its runner, its lock, the command that resumes it)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.config.labels import check_label
from orchestrator.config.locations import default_results_dir
from orchestrator.config.profiles import MLPERF, Profile, Profiles
from orchestrator.config.seedspec import SeedSpec
from orchestrator.config.workloads import Workload
from orchestrator.errors import UsageError
from orchestrator.mlperf import benchmarks
from orchestrator.mlperf.quality import Goal
from orchestrator.results.records import ScoringRule
from orchestrator.results.store import Store
from orchestrator.results.stored_run import StoredRun
from orchestrator.session import datasets

if TYPE_CHECKING:
    from orchestrator.session.deciding import Decider, Request

RUNNER_MARGIN_MINUTES = 5
"""A batch system's own time limit (Slurm's) sits this far above the profile's wall-clock limit, so
that mltrain's fires first and the seed is recorded as timed out."""


@dataclass(frozen=True, kw_only=True)
class BenchmarkPlan:
    """Everything decided before the first seed runs."""

    workload: Workload
    profile: Profile
    """The profile as the run follows it (the mlperf profile with its benchmark's rule, `profile_for`)."""
    ruleset: str
    """The mlperf_logging ruleset the seeds' logs are checked under (`benchmarks.ruleset_of`)."""
    seeds: tuple[int, ...]
    seeds_random: bool
    """Seeds were drawn from the OS (recorded in the manifest)."""
    data_dir: Path
    makes_synthetic_data: bool = False
    """data_dir is the profile's synthetic set, made there when it is missing."""
    real_data: bool = True
    """The seeds read real data (the user's, or a real-source profile's), not the profile's synthetic
    set: the profile's ``real_data`` env applies."""
    label: str | None = None
    """Names the setup for comparisons (`mltrain compare --label`)."""
    resumes: StoredRun | None = None
    """The stored run this plan completes, if it is a resume."""
    retry_failed: bool = False
    """Resume: also rerun the seeds an infrastructure fault ended (each attempt is kept)."""
    decider: Decider | None = None
    """A run that decides its own seed count (`session.deciding`): after each finished seed it
    names the next one or stops; None: the plan's seeds are all there is."""

    @property
    def possible_seeds(self) -> tuple[int, ...]:
        """Every seed the run may take: the plan's, and those its rule may ask for."""
        later = self.decider.rule.seed_order if self.decider is not None else ()
        return (*self.seeds, *(s for s in later if s not in self.seeds))

    @property
    def seeds_said(self) -> str:
        """'9 seeds', or 'up to 20 seeds until decided' for a run that decides its own count."""
        if self.decider is None:
            return f"{len(self.seeds)} seeds"
        rule = self.decider.rule
        until = f"decided against {rule.against}" if rule.mode == "until_decided" else "the interval is narrow enough"
        return f"up to {rule.max_seeds} seeds, until {until}"

    @property
    def target(self) -> float:
        return self.profile.target if self.profile.target is not None else self.workload.quality.target

    @property
    def goal(self) -> Goal:
        """The workload's quality metric and direction, with the profile's target."""
        return Goal.of(self.workload.quality, self.target)

    @property
    def rule(self) -> ScoringRule:
        return ScoringRule(
            drop_per_end=self.profile.drop_per_end,
            max_non_converged=self.profile.max_non_converged,
            runs_required=self.profile.runs,
        )

    @property
    def runner_time_limit_minutes(self) -> float:
        """The time limit a batch system is given for each seed's job."""
        return self.profile.timeout_minutes + RUNNER_MARGIN_MINUTES

    @property
    def lock_note(self) -> str:
        """Whose stale lock was taken over when the resumed run was locked ('' when none was)."""
        lock = self.resumes.lock if self.resumes is not None else None
        return lock.note if lock is not None else ""

    def runner_name(self, asked: str | None) -> str:
        """The runner the plan runs on: a resumed run's own (UsageError when another is asked for),
        else the one asked for (local when none is)."""
        if self.resumes is None:
            return asked or "local"
        ran = self.resumes.manifest.runner
        if asked not in (None, ran):
            raise UsageError(f"run {self.resumes.run_id} ran on the {ran} runner: resume it there"
                             f" (drop --runner or give --runner {ran})")
        return ran

    def nodes(self, asked: int | None) -> int:
        """The nodes of one seed: a resumed run's own (UsageError when another count is asked for),
        else the count asked for (1 when none is)."""
        if self.resumes is None:
            return 1 if asked is None else asked
        ran = self.resumes.manifest.runner_provenance.get("nodes", 1)
        if asked not in (None, ran):
            raise UsageError(f"run {self.resumes.run_id} ran its seeds on {ran} node(s): resume it so"
                             f" (drop --nodes or give --nodes {ran})")
        return ran

    def locked(self) -> BenchmarkPlan:
        """The plan with its resumed run read again under the run's lock, once the plan stands
        (RunBusy, naming the holder, at once while a live process has it). A new run is locked as
        it is made."""
        return replace(self, resumes=self.resumes.locked()) if self.resumes is not None else self

    def seed_env(self) -> dict[str, str]:
        """What every seed's run_and_time.sh is told besides DATADIR and RESULTS_DIR."""
        real = self.profile.real_data.env if self.real_data and self.profile.real_data is not None else {}
        return {
            **self.profile.env,
            **real,
            "MLTRAIN_PROFILE": self.profile.name,
            **({"MLTRAIN_SEEDS_RANDOM": "1"} if self.seeds_random else {}),  # the workloads' division rule
            self.workload.quality.env: repr(self.target),
        }


def never_valid(seeds: int, profile: Profile) -> str | None:
    """Why ``seeds`` runs could never make a valid result under ``profile``'s rule (too few to keep
    one after the olympic drops, or another count than the rules require); None when they can.
    Said before the first seed runs (a one-seed try-out is allowed, and scored invalid)."""
    if profile.runs is not None and seeds != profile.runs:
        return (f"{seeds} seed(s), but the {profile.name} profile needs exactly {profile.runs} runs: the result"
                f" will be invalid (give {profile.runs} seeds for a valid one)")
    least = 2 * profile.drop_per_end + 1
    if seeds < least:
        return (f"{seeds} seed(s), but the {profile.name} profile drops the {profile.drop_per_end} fastest and"
                f" {profile.drop_per_end} slowest runs: the result will be invalid (give at least {least} seeds"
                " for a valid one)")
    return None


def profile_for(workload: Workload, profiles: Profiles, name: str | None) -> Profile:
    """The workload's profile from seeds.yaml; the mlperf profile takes its runs and drops from
    MLPerf's rule for the workload's benchmark."""
    if (name or profiles.default_profile) == MLPERF and not workload.compliance:
        raise UsageError(f"{workload.name} declares compliance: false (it implements no MLPerf benchmark's rules):"
                         f" it has no {MLPERF} profile; run it with --profile qualify or smoke")
    chosen = profiles.get(workload.name, name)
    if not chosen.is_mlperf:
        return chosen
    rules = benchmarks.get(workload.mlperf_benchmark)
    return chosen.following(runs=rules.runs, drop_per_end=rules.drop_per_end,
                            max_non_converged=rules.max_non_converged)


def plan_new(
    workload: Workload, profiles: Profiles, *, seeds: SeedSpec | None, profile: str | None, data: Path | None,
    label: str | None, retry_failed: bool = False,
) -> BenchmarkPlan:
    """A fresh run: the profile's defaults, overridden by what the user gave."""
    if retry_failed:
        raise UsageError("--retry-failed reruns failed seeds of a stored run: give it with --resume RUN")
    check_label(label)
    ruleset = benchmarks.ruleset_of(workload)
    chosen = profile_for(workload, profiles, profile)
    spec = chosen.seeds if seeds is None else seeds
    return BenchmarkPlan(
        workload=workload, profile=chosen, ruleset=ruleset, seeds=spec.seeds(), seeds_random=bool(spec.random),
        data_dir=datasets.resolve_data_dir(workload, chosen, data), label=label,
        makes_synthetic_data=chosen.dataset.source == "synthetic" and data is None,
        real_data=chosen.dataset.source == "real" or data is not None,
    )


def plan_resume(
    workload: Workload, profiles: Profiles, previous: StoredRun, *, seeds: SeedSpec | None, profile: str | None,
    data: Path | None, label: str | None, retry_failed: bool = False,
) -> BenchmarkPlan:
    """Complete a stored run: its seeds, profile, data and seed rule stay what they were; only a
    moved dataset (--data) and the label may be given again. Nothing is written: the caller locks the
    run (`StoredRun.locked`) once the plan stands."""
    check_label(label)
    m = previous.manifest
    if m.made_elsewhere:
        raise UsageError(f"run {previous.run_id} was imported from logs made elsewhere: there is nothing to resume")
    if m.workload != workload.name:
        raise UsageError(f"run {previous.run_id} is a {m.workload} run, not {workload.name}")
    if seeds is not None or profile:
        raise UsageError("--resume reruns the unfinished seeds of that run: drop --seeds and --profile")
    chosen = profile_for(workload, profiles, m.profile)
    ruleset = m.ruleset or benchmarks.ruleset_of(workload)  # the run goes on under the rules it began with
    recorded = Path(m.data_dir) if m.data_dir else None
    if data is None and chosen.dataset.source == "synthetic" and recorded is not None:
        data_dir = recorded  # made again there if it was removed meanwhile
    else:
        data_dir = datasets.resolve_data_dir(workload, chosen, data or recorded)
    decider = None
    if previous.decisions is not None:  # it goes on under its own rule
        from orchestrator.session.deciding import Decider

        decider = Decider(previous.decisions.rule)
    return BenchmarkPlan(
        workload=workload, profile=chosen, ruleset=ruleset, seeds=m.seeds, seeds_random=m.seeds_random,
        data_dir=data_dir, label=label or m.label, resumes=previous, retry_failed=retry_failed,
        makes_synthetic_data=chosen.dataset.source == "synthetic" and data is None, decider=decider,
        real_data=chosen.dataset.source == "real" or not datasets.is_synthetic_dir(workload, data_dir),
    )


def plan_run(
    workload: Workload, profiles: Profiles, store: Store, *, resume: str | None, seeds: SeedSpec | None,
    profile: str | None, data: Path | None, label: str | None, retry_failed: bool, request: Request | None,
) -> BenchmarkPlan:
    """`mltrain run`'s plan: the stored run ``resume`` completed under its own seed rule, or a new run
    (deciding its own seed count where ``request`` asks for that). Nothing is written."""
    if resume and request is not None:
        raise UsageError("--resume goes on under the run's own seed rule: drop --until-decided, --seeds auto and"
                         " their options")
    if resume:
        return plan_resume(workload, profiles, store.open(resume), seeds=seeds, profile=profile, data=data,
                           label=label, retry_failed=retry_failed)
    plan = plan_new(workload, profiles, seeds=None if request else seeds, profile=profile, data=data, label=label,
                    retry_failed=retry_failed)
    if request is None:
        return plan
    from orchestrator.session.deciding import with_decider

    return with_decider(plan, request, store)


def resume_command(run: StoredRun, *options: str) -> str:
    """The command line that completes ``run`` (with its --results when that is not the default)."""
    root = run.store.root
    where = () if root.resolve() == default_results_dir().resolve() else ("--results", str(root))
    return " ".join(["mltrain", "run", run.manifest.workload, "--resume", run.run_id, *where, *options])
