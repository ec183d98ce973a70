"""Stored inference runs as setups side by side: runs sharing a label form one setup, the scenario's
metric over its repeated runs gives a mean with a 95% interval, the ratio to the baseline its
interval, Welch's test whether the difference is real (`orchestrator.insight.statistics`).
Only runs of one model, scenario and profile compare: a smoke number is comparable with nothing
but another smoke number.

The harness's own settings travel with each setup (backend and provider, batch, intra-op threads,
workers): they follow the machine's CPU count unless given, and they alone moved a Server p90 by 2x
beside the reference. Where they differ between setups, or within one, the comparison says so:
the ratio then measures the settings as much as the hardware.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from orchestrator.errors import UsageError
from orchestrator.insight.runs import hardware_summary
from orchestrator.insight.statistics import Interval, Test, mean_interval, ratio_interval, welch
from orchestrator.results.inference import InferenceRun
from orchestrator.results.refresh import Listing
from orchestrator.results.store import Store

SETTINGS = ("backend", "batch", "threads", "workers")
"""The harness settings a comparison shows, in order."""


def harness_settings(run: InferenceRun) -> dict[str, str]:
    """What the harness ran ``run`` with, as words (a setting the run did not record: '?')."""
    if run.result is None:
        return dict.fromkeys(SETTINGS, "?")
    h = run.result.harness
    inline = run.scenario in ("SingleStream", "MultiStream")  # answered in LoadGen's thread: no workers
    return {"backend": f"{h.backend} on {h.providers[0] if h.providers else h.device}",
            "batch": f"up to {h.max_batch}",
            "threads": f"{h.threads or 'default'}{_how(h.threads_source)}",
            "workers": "-" if inline else f"{h.workers or '?'}{_how(h.workers_source)}"}


def _how(source: str) -> str:
    """' (auto)', ' (given)' ... from a recorded reason ('auto: ...'); '' where none was recorded."""
    how = source.split(":")[0]
    return f" ({how})" if how else ""


@dataclass(frozen=True, kw_only=True)
class InferenceSetup:
    name: str
    runs: tuple[InferenceRun, ...]
    hardware: str

    @property
    def settings(self) -> dict[str, str]:
        """Each harness setting of the setup's runs; several values joined by ' / ' when its runs differ."""
        seen: dict[str, list[str]] = {key: [] for key in SETTINGS}
        for run in self.runs:
            for key, value in harness_settings(run).items():
                if value not in seen[key]:
                    seen[key].append(value)
        return {key: " / ".join(values) for key, values in seen.items()}

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
    setting_differences: tuple[str, ...] = ()
    """One sentence per harness setting that differs between setups or within one."""


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
                               rows=tuple(rows), setting_differences=setting_differences(groups))


def setting_differences(groups: Sequence[InferenceSetup]) -> tuple[str, ...]:
    """Where the harness ran the setups differently, setting by setting."""
    said = []
    settings = {group.name: group.settings for group in groups}  # one setup per name (`setups`)
    for key in SETTINGS:
        values = {name: setting[key] for name, setting in settings.items()}
        mixed = [name for name, value in values.items() if " / " in value]
        if len(set(values.values())) > 1:
            said.append(f"{key} differs: " + "; ".join(f"{name} {value}" for name, value in values.items()))
        elif mixed:
            said.append(f"{key} differs within {', '.join(mixed)}: {values[mixed[0]]}")
    return tuple(said)
