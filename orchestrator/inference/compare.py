"""Stored inference runs as setups side by side: runs sharing a label form one setup, the scenario's
metric over its repeated runs gives a mean with a 95% interval, the ratio to the baseline its
interval, Welch's test whether the difference is real (`orchestrator.insight.statistics`).
Only runs of one model, scenario and profile compare: a smoke number is comparable with nothing
but another smoke number.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from orchestrator.errors import UsageError
from orchestrator.insight.runs import hardware_summary
from orchestrator.insight.statistics import Interval, Test, mean_interval, ratio_interval, welch
from orchestrator.results.inference import InferenceRun
from orchestrator.results.store import Listing, Store


@dataclass(frozen=True, kw_only=True)
class InferenceSetup:
    name: str
    runs: tuple[InferenceRun, ...]
    hardware: str

    @property
    def values(self) -> list[float]:
        return [r.result.performance.value for r in self.runs
                if r.result and r.result.performance and r.result.performance.value is not None]


@dataclass(frozen=True, kw_only=True)
class SetupRow:
    setup: InferenceSetup
    mean: Interval
    ratio: Interval | None
    """To the baseline, oriented so that > 1 is better; None for the baseline itself."""
    test: Test | None
    valid: int
    """Runs LoadGen called VALID."""


@dataclass(frozen=True, kw_only=True)
class InferenceComparison:
    model: str
    scenario: str
    profile: str
    metric: str
    unit: str
    higher_is_better: bool
    baseline: str
    rows: tuple[SetupRow, ...]


def wants_inference(chosen: Sequence[str], listing: Listing) -> bool:
    """Whether the chosen runs (`insight.runs.chosen_runs`) are inference runs; UsageError when
    training and inference runs are mixed."""
    kinds = {row["run_id"]: row.get("kind") for row in listing.rows}
    inference = [r for r in chosen if kinds.get(r) == "inference"]
    if not inference:
        return False
    training = [r for r in chosen if kinds.get(r) != "inference"]
    if training:
        raise UsageError(f"{training[0]} is a training run and {inference[0]} an inference run: compare them apart")
    return True


def load(store: Store, chosen: Sequence[str]) -> list[InferenceRun]:
    """The chosen inference runs, read; they must share one model, scenario and profile."""
    runs = [store.open_inference(r) for r in chosen]
    if not runs:
        raise UsageError("name at least one inference run (RUN...) or --label")
    first = runs[0]
    for run in runs[1:]:
        for what in ("model", "scenario", "profile"):
            if getattr(run, what) != getattr(first, what):
                raise UsageError(f"{run.run_id} ran {what} {getattr(run, what)} and {first.run_id} "
                                 f"{getattr(first, what)}: compare runs of one model, scenario and profile")
    return runs


def setups(runs: Sequence[InferenceRun]) -> list[InferenceSetup]:
    groups: dict[str, list[InferenceRun]] = {}
    for run in runs:
        groups.setdefault(run.setup_name, []).append(run)
    return [InferenceSetup(name=name, runs=tuple(members), hardware=hardware_summary(members[0].system))
            for name, members in groups.items()]


def compare(runs: Sequence[InferenceRun], baseline: str | None = None) -> InferenceComparison:
    groups = setups(runs)
    names = [g.name for g in groups]
    base_name = baseline or names[0]
    if base_name not in names:
        raise UsageError(f"--baseline {base_name!r} is not one of the setups ({', '.join(names)})")
    perf = next((r.result.performance for r in runs if r.result and r.result.performance), None)
    if perf is None:
        raise UsageError("none of these runs has a result to compare")
    base = next(g for g in groups if g.name == base_name)
    rows = []
    for group in groups:
        is_base = group is base
        rows.append(SetupRow(
            setup=group, mean=mean_interval(group.values),
            ratio=None if is_base else ratio_interval(base.values, group.values,
                                                      higher_is_better=perf.higher_is_better),
            test=None if is_base else welch(base.values, group.values),
            valid=sum(1 for r in group.runs if r.result and r.result.performance
                      and r.result.performance.loadgen_valid)))
    first = runs[0]
    return InferenceComparison(model=first.model, scenario=first.scenario, profile=first.profile, metric=perf.metric,
                               unit=perf.unit, higher_is_better=perf.higher_is_better, baseline=base_name,
                               rows=tuple(rows))
