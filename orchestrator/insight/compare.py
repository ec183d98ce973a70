"""Side-by-side comparison of setups: is one really faster, and is that the hardware or luck?

Pure functions over plain data. A `Setup` is the seeds measured on one configuration; `compare`
returns one `SetupRow` per setup against a baseline:

- time-to-train: olympic score (MLPerf's rule, `scoring.olympic_mean`), a 95% bootstrap interval
  of it (its normal approximation above `LARGE_SAMPLE` runs), the speedup over the baseline with
  its interval, and a Welch t-test on the converged runs' times;
- the same time split in two: epochs-to-target (convergence luck: median CV ~27% in the published
  unet3d results) and seconds per epoch / samples per second (the hardware: ~2.6%), each with a
  Student-t interval, the ratio to the baseline and a Welch test;
- for each quantity, the seeds per setup a two-sided Welch test (alpha 0.05, power 0.8) would
  need to resolve the difference observed (the tests themselves: `orchestrator.insight.statistics`);
- energy-to-train (mean over the seeds the olympic score keeps, as the MLPerf power summarizer
  does) and, given a price per hour, cost-to-train (price x olympic time);
- before any of those numbers is read as the setups': the quiet-host evidence of every seed
  (`insight.quiet`). A difference where a seed of either setup ran on a disturbed host is not
  attributable to the setups (`SetupRow.attributable` False, `not_attributable` naming the causes);
  the statistics stand where both sides are quiet (a side whose host was not measured is said so).

Intervals of the olympic score resample the converged runs and keep the observed number of
non-converged ones, so every resample is scored by the same rule as the result.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from functools import cached_property
from operator import attrgetter
from typing import Any

import numpy as np

from orchestrator import collector
from orchestrator.config.profiles import SMOKE
from orchestrator.insight import convergence
from orchestrator.insight.bootstrap import olympic_interval, speedup_interval
from orchestrator.insight.host_evidence import HostEvidence, HostVerdict, attribution, host_evidence
from orchestrator.insight.setup_facts import differing_facts
from orchestrator.insight.statistics import (
    FloatArray,
    Interval,
    Test,
    cv,
    mean_interval,
    ratio_interval,
    welch,
)
from orchestrator.mlperf.scoring import olympic_kept
from orchestrator.units import minutes


@dataclass(frozen=True, kw_only=True, slots=True)
class SeedResult:
    """One seed of one setup, as a comparison needs it (slotted: a comparison of 100,000 runs holds
    300,000, each 160 bytes with its numbers where a dict of its fields made it 208)."""

    seed: int
    """The seed."""
    converged: bool
    """Reached the target."""
    time_to_train_ms: float | None
    """run_stop - run_start (set for converged runs)."""
    epochs_to_target: float | None = None
    """Epoch of the first eval at or above the target."""
    samples_per_epoch: int | None = None
    """Training samples per epoch."""
    energy_j: float | None = None
    """GPU energy-to-train, when telemetry measured it."""
    host: HostVerdict = "unknown"
    """Whether its host was quiet while it ran (`insight.quiet`); unknown without telemetry."""
    host_reason: str = ""
    """The verdict's one line (what disturbed it)."""

    def __post_init__(self) -> None:
        if self.converged and (self.time_to_train_ms is None or self.time_to_train_ms <= 0):
            raise ValueError(f"seed {self.seed}: a converged run needs a positive time_to_train_ms")
        if self.epochs_to_target is not None and self.epochs_to_target <= 0:
            raise ValueError(f"seed {self.seed}: epochs_to_target must be positive")

    @property  # (not a cached_property: Python 3.11's takes a lock at each first use, 300,000 seeds)
    def seconds_per_epoch(self) -> float | None:
        if not self.converged or not self.epochs_to_target or self.time_to_train_ms is None:
            return None
        return self.time_to_train_ms / 1000 / self.epochs_to_target

    @property
    def samples_per_second(self) -> float | None:
        per_epoch = self.seconds_per_epoch
        if per_epoch is None or not self.samples_per_epoch:
            return None
        return self.samples_per_epoch / per_epoch


@dataclass(frozen=True, kw_only=True)
class Setup:
    """The seeds measured on one configuration."""

    name: str
    """What the user calls it (a run label or run id)."""
    seeds: tuple[SeedResult, ...]
    """Every finished seed, converged or not."""
    drop_per_end: int = 1
    """Olympic scoring: runs dropped at each end."""
    max_non_converged: int = 1
    """More non-converged runs than this make the score invalid."""
    hardware: str = "unknown"
    """Accelerators (e.g. '8x NVIDIA A100-SXM4-80GB') or the CPU."""
    run_ids: tuple[str, ...] = ()
    """The benchmark runs pooled into this setup."""
    scaling_factor: float = 1.0
    """The RCP scaling factor MLCommons applies to this setup's olympic score (scaling.json)."""
    benchmark: str | None = None
    """The MLPerf benchmark the runs implement."""
    accelerator: str | None = None
    """Accelerator model ('NVIDIA H100-SXM5-80GB'); None on a CPU."""
    accelerators: int | None = None
    """How many accelerators one run used."""
    published: bool = False
    """A result MLCommons published (from the shipped table), not a run of the user's."""
    reference: convergence.Reference | None = None
    """MLCommons' reference convergence point for this setup's batch size, in epochs."""
    profile: str | None = None
    """The profile its runs were made with (smoke, qualify, mlperf); published results are mlperf."""
    facts: dict[str, str] = field(default_factory=dict)
    """What it ran on and with (`insight.setup_facts`): GPU, driver, runner, image..., by name."""

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("a setup needs a name")
        if self.drop_per_end < 0 or self.max_non_converged < 0:
            raise ValueError(f"setup {self.name}: drop_per_end and max_non_converged must be >= 0")
        if not self.scaling_factor > 0:
            raise ValueError(f"setup {self.name}: scaling_factor must be positive")

    def converged(self) -> list[SeedResult]:
        return list(self._converged)

    @cached_property
    def _converged(self) -> tuple[SeedResult, ...]:
        """Its converged seeds, found once (a comparison asks a setup of 150,000 seeds for them 14 times)."""
        return tuple(s for s in self.seeds if s.converged)

    def values(self, name: str) -> FloatArray:
        """One per-seed quantity (a `SeedResult` field or property, or ``time_to_train_s``) over its
        converged seeds that have it, in their order, as a read-only array made once a quantity: a
        comparison asks for each of them again for every setup it compares with this one, and each
        statistic of them takes an array (made of a sequence of 150,000 values at each call before)."""
        found = self._values.get(name)
        if found is None:
            seeds = self._converged
            if name == "time_to_train_s":
                found = np.fromiter((s.time_to_train_ms / 1000 for s in seeds if s.time_to_train_ms is not None),
                                    dtype=float)
            else:
                found = np.fromiter((v for v in map(attrgetter(name), seeds) if v is not None), dtype=float)
            found.flags.writeable = False
            self._values[name] = found
        return found

    @cached_property
    def _values(self) -> dict[str, FloatArray]:
        return {}


@dataclass(frozen=True, kw_only=True)
class Quantity:
    """One per-seed quantity of one setup, and how it compares with the baseline."""

    n: int
    mean: Interval
    """Mean with a Student-t 95% interval."""
    cv: float | None
    """Coefficient of variation (sample std / mean)."""
    ratio: Interval | None
    """mean(baseline) / mean(setup) for times, mean(setup) / mean(baseline) for rates: >1 is better.
    None for the baseline itself."""
    test: Test | None
    """None for the baseline itself."""


@dataclass(frozen=True, kw_only=True)
class PerAccelerator:
    """A setup's speed divided by its accelerators, to compare systems of different sizes."""

    accelerators: int
    accelerator_minutes: float | None
    """MLPerf score (minutes) x accelerators: the accelerator time one result costs."""
    samples_per_second: float | None
    """Mean training samples per second per accelerator."""


@dataclass(frozen=True, kw_only=True)
class SetupRow:
    """One line of the comparison."""

    name: str
    hardware: str
    run_ids: tuple[str, ...]
    n: int
    """Seeds that finished."""
    converged: int
    valid: bool
    """Olympic score defined: enough runs and at most max_non_converged failures."""
    olympic_ms: Interval
    """Olympic time-to-train with a 95% bootstrap interval."""
    scaling_factor: float
    """The RCP scaling factor MLCommons applies (1.0: none)."""
    mlperf_score_ms: Interval
    """olympic_ms x scaling_factor: the score as MLCommons' summarizer reports it."""
    speedup: Interval | None
    """Baseline olympic time / this olympic time, with a 95% bootstrap interval."""
    ttt_test: Test | None
    """Welch t-test of converged time-to-train against the baseline."""
    time_to_train_s: Quantity
    epochs_to_target: Quantity
    seconds_per_epoch: Quantity
    samples_per_second: Quantity
    energy_j: float | None
    """Mean energy-to-train of the seeds the olympic score keeps; None unless all were measured."""
    cost: float | None = None
    """Price per hour x olympic time, when a price was given."""
    published: bool = False
    """A result MLCommons published, recomputed from its per-run times; not run by the user."""
    per_accelerator: PerAccelerator | None = None
    """None when the number of accelerators is unknown (a CPU run)."""
    convergence: convergence.ConvergenceCheck | None = None
    """Epochs-to-target against the RCP for this batch size; None without one."""
    profile: str | None = None
    """The profile of its runs."""
    smoke: bool = False
    """It, or the baseline it is compared with, is a smoke run: its numbers prove the pipeline only."""
    host: HostEvidence | None = None
    """Its seeds' quiet-host verdicts."""
    attributable: bool = True
    """The difference from the baseline can be read as the setups' (no seed of either ran on a
    disturbed host); True for the baseline itself."""
    not_attributable: tuple[str, ...] = ()
    """Why not: '<setup> seed 3: the host ran other work ...', per disturbed side."""
    unmeasured: tuple[str, ...] = ()
    """The setups of this comparison (it, the baseline) with seeds whose host was not judged."""
    differs: tuple[str, ...] = ()
    """The facts (`Setup.facts`) in which it differs from the baseline: 'runner', 'GPU'..."""
    notes: tuple[str, ...] = field(default_factory=tuple)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, kw_only=True)
class Comparison:
    baseline: str
    rows: tuple[SetupRow, ...]

    def to_json(self) -> dict[str, Any]:
        return {"baseline": self.baseline, "rows": [row.to_json() for row in self.rows]}


def compare(setups: Sequence[Setup], baseline: str | None = None,
            cost_per_hour: dict[str, float] | None = None) -> Comparison:
    """Compare every setup with the baseline (default: the first)."""
    if not setups:
        raise ValueError("nothing to compare")
    names = [s.name for s in setups]
    if len(set(names)) != len(names):
        raise ValueError(f"setup names must differ: {names}")
    base_name = baseline or names[0]
    if base_name not in names:
        raise ValueError(f"baseline {base_name!r} is not one of {', '.join(names)}")
    base = setups[names.index(base_name)]
    prices = cost_per_hour or {}
    with collector.paused():  # per-seed values of every setup, no cycle among them
        evidence = {setup.name: host_evidence(setup) for setup in setups}  # the names differ: checked above
        rows = tuple(_row(setup, None if setup is base else base, prices.get(setup.name), evidence)
                     for setup in setups)
    return Comparison(baseline=base_name, rows=rows)


def _row(setup: Setup, base: Setup | None, price: float | None, evidence: dict[str, HostEvidence]) -> SetupRow:
    """``evidence``: each setup's `host_evidence`, by name."""
    olympic = olympic_interval(setup)
    notes = []
    non_converged = len(setup.seeds) - len(setup.converged())
    valid = olympic.value is not None and non_converged <= setup.max_non_converged
    if not valid:
        notes.append(f"no valid olympic score: {non_converged} non-converged, {len(setup.seeds)} finished")
    energy = olympic_energy(setup)
    cost = price * olympic.value / 3.6e6 if price is not None and olympic.value is not None else None
    scaled = scaled_interval(olympic, setup.scaling_factor)
    samples = quantity(setup, base, "samples_per_second", higher_is_better=True)
    attributable, causes = (attribution(base, setup, evidence[base.name], evidence[setup.name]) if base is not None
                            else (True, ()))
    return SetupRow(
        name=setup.name,
        hardware=setup.hardware,
        run_ids=setup.run_ids,
        n=len(setup.seeds),
        converged=len(setup.converged()),
        valid=valid,
        olympic_ms=olympic,
        scaling_factor=setup.scaling_factor,
        mlperf_score_ms=scaled,
        speedup=speedup_interval(base, setup) if base is not None else None,
        ttt_test=(welch(per_seed_values(base, "time_to_train_s"), per_seed_values(setup, "time_to_train_s"))
                  if base else None),
        time_to_train_s=quantity(setup, base, "time_to_train_s", higher_is_better=False),
        epochs_to_target=quantity(setup, base, "epochs_to_target", higher_is_better=False),
        seconds_per_epoch=quantity(setup, base, "seconds_per_epoch", higher_is_better=False),
        samples_per_second=samples,
        energy_j=energy,
        cost=cost,
        published=setup.published,
        per_accelerator=per_accelerator(setup.accelerators, scaled, samples),
        convergence=(convergence.check(setup.reference, per_seed_values(setup, "epochs_to_target"), non_converged,
                                       setup.drop_per_end, olympic.value) if setup.reference is not None else None),
        profile=setup.profile,
        smoke=SMOKE in (setup.profile, base.profile if base is not None else None),
        host=evidence[setup.name],
        attributable=attributable,
        not_attributable=causes,
        unmeasured=tuple(side.name for side in (setup, *((base,) if base is not None else ()))
                         if evidence[side.name].unknown),
        differs=differing_facts(base, setup) if base is not None else (),
        notes=tuple(notes),
    )


def scaled_interval(olympic: Interval, factor: float) -> Interval:
    """The olympic score and its interval times the RCP scaling factor."""
    def times(value: float | None) -> float | None:
        return None if value is None else value * factor

    return Interval(value=times(olympic.value), low=times(olympic.low), high=times(olympic.high))


def per_accelerator(count: int | None, score: Interval, samples: Quantity) -> PerAccelerator | None:
    if not count:
        return None
    return PerAccelerator(
        accelerators=count,
        accelerator_minutes=minutes(score.value) * count if score.value is not None else None,
        samples_per_second=samples.mean.value / count if samples.mean.value is not None else None,
    )


# ---------------------------------------------------------------- time-to-train


# ---------------------------------------------------------------- one quantity


def quantity(setup: Setup, base: Setup | None, name: str, *, higher_is_better: bool) -> Quantity:
    values = per_seed_values(setup, name)
    if base is None:
        return Quantity(n=len(values), mean=mean_interval(values), cv=cv(values), ratio=None, test=None)
    base_values = per_seed_values(base, name)
    return Quantity(
        n=len(values),
        mean=mean_interval(values),
        cv=cv(values),
        ratio=ratio_interval(base_values, values, higher_is_better=higher_is_better),
        test=welch(base_values, values),
    )


def per_seed_values(setup: Setup | None, name: str) -> FloatArray:
    """One per-seed quantity over the converged seeds that have it (`Setup.values`; none without a setup)."""
    return np.empty(0) if setup is None else setup.values(name)


# ---------------------------------------------------------------- energy


def olympic_energy(setup: Setup) -> float | None:
    """Mean energy of the seeds the olympic score keeps (MLPerf's power summarizer indexes energy
    by the time ranking); None unless every kept seed has a measurement."""
    converged = sorted(setup.converged(), key=lambda s: s.time_to_train_ms or 0.0)
    kept = olympic_kept(len(converged), len(setup.seeds) - len(converged), setup.drop_per_end)
    if kept is None or any(s.energy_j is None for s in converged[kept]):
        return None
    return float(np.mean([s.energy_j for s in converged[kept]]))

