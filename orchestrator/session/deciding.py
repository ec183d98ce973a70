"""Runs that decide their own seed count: `mltrain run W --until-decided --against REF` (seeds
until the comparison with a stored setup is decided) and `mltrain run W --seeds auto` (seeds until
the mean per-seed time-to-train is known to a stated width).

The statistics are `orchestrator.insight.sequential` (an anytime-valid confidence sequence: the
decision may be taken after every seed and keeps its 5% error rate); this module turns stored
runs into its numbers, decides after each finished seed whether another is needed, and keeps the
rule and every decision in the run's ``decisions.json`` (`orchestrator.results.decisions`).

Seeds: the run's manifest lists the seeds that ran, growing by one each time the rule asks for
another; the order they come in is fixed when the run is made (the profile's seeds, then the
next integers, or seeds drawn from the OS for a random profile) and kept in the rule, so a resumed
run goes on with the same seeds under the same rule.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal

from orchestrator.config.seedspec import AUTO, SeedSpec
from orchestrator.errors import UsageError
from orchestrator.insight import sequential
from orchestrator.insight.compare import Setup, per_seed_values
from orchestrator.insight.runs import load_runs, seed_result, to_setups
from orchestrator.insight.statistics import ALPHA, FloatArray
from orchestrator.results.decisions import (
    QUANTITIES,
    DecisionLog,
    DecisionRule,
    DecisionStep,
    MeanDecision,
    QuantityDecision,
    QuantityName,
    Verdict,
)
from orchestrator.results.records import RunRecord
from orchestrator.results.store import Store
from orchestrator.results.stored_run import StoredRun

if TYPE_CHECKING:
    from orchestrator.session.plan import BenchmarkPlan

DEFAULT_MAX_SEEDS = 20
DEFAULT_MARGIN_PCT = 3.0
DEFAULT_WIDTH_PCT = 5.0
MAX_SEEDS_LIMIT = 1000
HIGHER_IS_BETTER = {"seconds_per_epoch": False, "samples_per_second": True, "time_to_train_s": False}


@dataclass(frozen=True, kw_only=True)
class Request:
    """What the command line asked of a run that decides its own seed count, checked."""

    mode: Literal["until_decided", "width"]
    against: str | None = None
    margin: float = DEFAULT_MARGIN_PCT / 100
    width: float = DEFAULT_WIDTH_PCT / 100
    max_seeds: int = DEFAULT_MAX_SEEDS


def request_of(*, seeds: SeedSpec | Literal["auto"] | None, until_decided: bool, against: str | None,
               margin: float | None, max_seeds: int | None, width: float | None) -> Request | None:
    """The sequential options of `mltrain run`, checked together; None when none was given."""
    auto = seeds == AUTO
    options = {"--against": against, "--margin": margin, "--max-seeds": max_seeds, "--width": width}
    if not until_decided and not auto:
        given = next((name for name, value in options.items() if value is not None), None)
        if given:
            raise UsageError(f"{given} goes with --until-decided or --seeds auto: add one, or drop {given}")
        return None
    if until_decided and seeds is not None:
        raise UsageError("--until-decided runs seeds until the comparison is decided: drop --seeds"
                         " (--max-seeds caps them)")
    if auto and (against is not None or margin is not None):
        raise UsageError("--seeds auto measures one setup: to compare with another, give --until-decided"
                         " --against RUN|LABEL instead")
    if until_decided and width is not None:
        raise UsageError("--width goes with --seeds auto; --until-decided stops on --margin")
    if until_decided and against is None:
        raise UsageError("--until-decided needs --against RUN|LABEL: the stored setup to compare with")
    if max_seeds is not None and not 1 <= max_seeds <= MAX_SEEDS_LIMIT:
        raise UsageError(f"--max-seeds {max_seeds}: give 1 to {MAX_SEEDS_LIMIT}")
    return Request(mode="until_decided" if until_decided else "width", against=against,
                   margin=_fraction("--margin", margin, DEFAULT_MARGIN_PCT),
                   width=_fraction("--width", width, DEFAULT_WIDTH_PCT),
                   max_seeds=DEFAULT_MAX_SEEDS if max_seeds is None else max_seeds)


def _fraction(option: str, percent: float | None, default: float) -> float:
    if percent is None:
        return default / 100
    if not math.isfinite(percent) or not 0 < percent < 100:
        raise UsageError(f"{option} {percent:g}: give a finite percent above 0 and below 100 (3 is 3%)")
    return percent / 100


def with_decider(plan: BenchmarkPlan, request: Request, store: Store) -> BenchmarkPlan:
    """``plan`` as a run that decides its own seed count: its first seed, and the rule. Checks that
    the rule can ever decide within --max-seeds, and reads the reference (nothing is written)."""
    profile = plan.profile
    if profile.runs is not None:
        raise UsageError(f"the {profile.name} profile needs exactly {profile.runs} runs: a run that stops once it has"
                         " decided cannot keep that; use a profile without a fixed count (qualify)")
    own_alpha = ALPHA / 2 if request.mode == "until_decided" else ALPHA
    least = max(sequential.least_seeds(own_alpha), 2 * profile.drop_per_end + 1)
    if request.max_seeds < least:
        raise UsageError(f"--max-seeds {request.max_seeds}: the rule cannot decide before {least} seeds (its interval"
                         f" is open below {sequential.least_seeds(own_alpha)} converged seeds, the {profile.name}"
                         f" profile scores at least {2 * profile.drop_per_end + 1}); give --max-seeds {least} or more")
    reference: dict[QuantityName, tuple[float, ...]] = {}
    run_ids: tuple[str, ...] = ()
    if request.mode == "until_decided":
        against = request.against or ""
        if plan.label is not None and plan.label == against:
            raise UsageError(f"--against {against!r} is the label this run gets (--label): give the new setup a"
                             " label of its own")
        setup = reference_setup(store, against, plan.workload.name)
        reference = {q: tuple(v.tolist()) for q in QUANTITIES if len(v := per_seed_values(setup, q)) >= 2}
        if not reference:
            raise UsageError(f"--against {against!r}: {len(setup.converged())} converged seed(s) in"
                             f" {', '.join(setup.run_ids)}; a comparison needs at least 2")
        run_ids = setup.run_ids
    rule = DecisionRule(
        mode=request.mode, method=sequential.METHOD, alpha=ALPHA, max_seeds=request.max_seeds, least_seeds=least,
        seed_order=profile.seeds.order(request.max_seeds),
        margin=request.margin if request.mode == "until_decided" else None,
        width=request.width if request.mode == "width" else None,
        against=request.against, reference_run_ids=run_ids, reference=reference,
    )
    return replace(plan, seeds=rule.seed_order[:1], decider=Decider(rule))


def reference_setup(store: Store, against: str, workload: str) -> Setup:
    """The stored setup --against names: a run id, else a label (as `mltrain compare` takes them)."""
    if _names_a_run(store, against) or _names_a_run(store, against, inference=True):
        named = [against]
    else:
        named = [row["run_id"] for row in store.list(label=against).rows]
    training = [run_id for run_id in reversed(named) if _names_a_run(store, run_id)]  # oldest first
    if not training:
        what = f"{named[0]} is an inference run" if named else f"no run and no label {against!r} in {store.root}"
        raise UsageError(f"--against {against!r}: {what}; compare with a stored training run or its label")
    views = load_runs(store, training)
    for view in views:
        if view.manifest.workload != workload:
            raise UsageError(f"--against {against!r}: run {view.run_id} is a {view.manifest.workload} run,"
                             f" not {workload}")
    return to_setups(views)[0]


def _names_a_run(store: Store, name: str, *, inference: bool = False) -> bool:
    """A training run's id (or, with ``inference``, an inference run's: it has no manifest.json)."""
    try:
        return store.is_inference(name) if inference else store.paths(name).manifest.is_file()
    except UsageError:  # not even a run id: a label
        return False


@dataclass(frozen=True)
class Decider:
    """After each finished seed: record the decision, and name the next seed or stop."""

    rule: DecisionRule

    def start(self, run: StoredRun) -> None:
        """Keep the rule beside the run before its first seed (a resumed run has it already)."""
        if run.decisions is None:
            run.save_decisions(DecisionLog(rule=self.rule))

    def next_seed(self, run: StoredRun, report: Callable[[DecisionLog], None]) -> int | None:
        """Decide on the seeds finished so far, record it, and return the next seed to run (None: stop)."""
        log = run.decisions or DecisionLog(rule=self.rule)
        step = decide(self.rule, run.finished_records(), run.manifest.seeds)
        if step != log.last:  # a resumed run with nothing new to decide on keeps its record as it is
            log = log.model_copy(update={"steps": (*log.steps, step)})
            run.save_decisions(log)
            report(log)
        if step.outcome != "going_on":
            return None
        return next(s for s in self.rule.seed_order if s not in run.manifest.seeds)


def decide(rule: DecisionRule, records: Mapping[int, RunRecord], seeds: Sequence[int]) -> DecisionStep:
    """What the rule concludes from the finished ``records`` of a run that has taken ``seeds``."""
    setup = Setup(name="this run", seeds=tuple(seed_result(s, r) for s, r in records.items()))
    left = rule.max_seeds - len(seeds)
    if rule.mode == "width":
        mean = _mean(rule, per_seed_values(setup, "time_to_train_s"))
        reached = mean.relative_half_width is not None and mean.relative_half_width <= (rule.width or 0)
        comparisons: tuple[QuantityDecision, ...] = ()
    else:
        mean = None
        comparisons = tuple(_comparison(rule, q, per_seed_values(setup, q), left) for q in QUANTITIES
                            if q in rule.reference)
        reached = all(c.verdict is not Verdict.UNDECIDED or (c.quantity != rule.primary and not c.within_reach)
                      for c in comparisons if c.quantity in (rule.primary, "time_to_train_s"))
    decided = reached and len(seeds) >= rule.least_seeds
    outcome = "decided" if decided else "budget_spent" if left <= 0 else "going_on"
    return DecisionStep(seeds=len(seeds), seed=seeds[-1], comparisons=comparisons, mean=mean, outcome=outcome)


def _comparison(rule: DecisionRule, quantity: QuantityName, values: FloatArray, left: int) -> QuantityDecision:
    margin = rule.margin or 0.0
    found = sequential.against_reference(values, rule.reference[quantity], higher_is_better=HIGHER_IS_BETTER[quantity],
                                         margin=margin, budget=len(values) + max(left, 0), alpha=rule.alpha)
    return QuantityDecision(
        quantity=quantity, n=found.n, reference_n=found.reference_n, speed=found.speed.value, low=found.speed.low,
        high=found.speed.high, verdict=found.verdict, within_reach=sequential.can_still_decide(found, margin),
    )


def _mean(rule: DecisionRule, seconds: FloatArray) -> MeanDecision:
    interval = sequential.geometric_mean_sequence(seconds, rule.alpha)
    reach = sequential.relative_half_width(interval)

    def ms(value: float | None) -> float | None:
        return None if value is None else value * 1000

    return MeanDecision(n=len(seconds), mean_ms=ms(interval.value), low_ms=ms(interval.low),
                        high_ms=ms(interval.high), relative_half_width=reach if math.isfinite(reach) else None)
