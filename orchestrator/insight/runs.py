"""Stored benchmark runs as comparison setups: group runs by label, read each seed's telemetry;
and published MLPerf results (`orchestrator.mlperf.published`) as setups beside them.

The one place that reads results folders for `compare`, `report` and `export`; everything
downstream works on the plain values built here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.errors import UsageError
from orchestrator.insight import convergence
from orchestrator.insight.compare import SeedResult, Setup
from orchestrator.insight.telemetry import load_series
from orchestrator.insight.telemetry_summary import SeedTelemetry, summarize
from orchestrator.insight.unavailable import is_unavailable
from orchestrator.mlperf import checkers, published
from orchestrator.mlperf.layout import accelerators as described_accelerators
from orchestrator.results.records import Manifest, RunRecord
from orchestrator.results.store import Store, StoredRun

AUTO = "auto"
"""`--published auto`: the published systems like each of the user's setups."""
PUBLISHED_SHOWN = 5
"""Published systems shown per query (the fastest)."""


@dataclass(frozen=True)
class SeedView:
    """One seed of a stored run with its telemetry (if any)."""

    seed: int
    record: RunRecord
    telemetry: SeedTelemetry | None
    series: dict[str, Any] | None
    output_path: Path


@dataclass(frozen=True)
class RunView:
    """A stored run as the hardware views need it."""

    run: StoredRun
    seeds: tuple[SeedView, ...]

    @property
    def run_id(self) -> str:
        return self.run.run_id

    @property
    def manifest(self) -> Manifest:
        return self.run.manifest

    @property
    def setup_name(self) -> str:
        return self.run.manifest.setup_name


def load_runs(store: Store, run_ids: Sequence[str], labels: Sequence[str] = ()) -> list[RunView]:
    """The named runs plus every run carrying one of ``labels``, oldest first, without repeats."""
    chosen = list(dict.fromkeys(run_ids))
    for label in labels:
        found = [row["run_id"] for row in store.list(label=label).rows]
        if not found:
            raise UsageError(f"no run in {store.root} carries the label {label!r}")
        chosen += [run_id for run_id in reversed(found) if run_id not in chosen]
    if not chosen:
        raise UsageError("name at least one run (RUN...) or --label")
    return [view_of(store.open(run_id)) for run_id in chosen]


def view_of(run: StoredRun) -> RunView:
    """A stored run's finished seeds with their telemetry summarised between run_start and run_stop
    (scored like `mltrain score`: only seeds that finished)."""
    seeds = []
    for seed, record in run.finished_records().items():
        paths = run.paths.seed(seed)
        series = _read_series(paths.telemetry)
        telemetry = None
        if series is not None and record.run_start_ms is not None and record.run_stop_ms is not None \
                and record.run_stop_ms > record.run_start_ms:
            telemetry = summarize(series, record.run_start_ms, record.run_stop_ms)
        seeds.append(SeedView(seed, record, telemetry, series, paths.output))
    return RunView(run, tuple(seeds))


def _read_series(path: Path) -> dict[str, Any] | None:
    """The seed's telemetry (None where none was sampled); a damaged file is a RecordError."""
    if not path.is_file():
        return None
    return load_series(path)


def to_setups(runs: Sequence[RunView]) -> list[Setup]:
    """One setup per label (runs without a label stand alone), in order of first appearance."""
    groups: dict[str, list[RunView]] = {}
    for view in runs:
        groups.setdefault(view.setup_name, []).append(view)
    setups = []
    for name, members in groups.items():
        rules = {_rule(view) for view in members}
        if len(rules) > 1:
            raise UsageError(f"setup {name!r} pools runs scored by different rules {sorted(rules)}: label them apart")
        factors = {_scaling_factor(view) for view in members}
        if len(factors) > 1:
            raise UsageError(f"setup {name!r} pools runs with different RCP scaling factors {sorted(factors)}:"
                             " label them apart")
        drop, max_failures = rules.pop()
        accelerator, count = accelerators_of(members[0].manifest)
        setups.append(Setup(
            name=name,
            seeds=tuple(_seed_result(s) for view in members for s in view.seeds),
            drop_per_end=drop,
            max_non_converged=max_failures,
            hardware=hardware_of(members[0].manifest),
            run_ids=tuple(view.run_id for view in members),
            scaling_factor=factors.pop(),
            benchmark=members[0].manifest.benchmark,
            accelerator=accelerator,
            accelerators=count,
            reference=_reference(members),
        ))
    return setups


def _reference(members: Sequence[RunView]) -> convergence.Reference | None:
    """The RCP for the runs' one batch size (and samples per epoch), by the round their import names,
    else training 4.0.0; None where the runs differ in either or the table has no point for them."""
    records = [s.record for view in members for s in view.seeds]
    sizes = {r.global_batch_size for r in records if r.global_batch_size}
    per_epoch = {r.samples_per_epoch for r in records if r.samples_per_epoch}
    imported = members[0].manifest.imported
    ruleset = imported.ruleset if imported is not None else checkers.DEFAULT_RULESET
    if len(sizes) != 1 or len(per_epoch) > 1:
        return None
    return convergence.reference_for(members[0].manifest.benchmark, ruleset, sizes.pop(),
                                     per_epoch.pop() if per_epoch else None)


def _scaling_factor(view: RunView) -> float:
    summary = view.run.summary
    return summary.mlcommons.scaling_factor if summary is not None and summary.mlcommons is not None else 1.0


def _rule(view: RunView) -> tuple[int, int]:
    rule = view.manifest.rule
    return rule.drop_per_end, rule.max_non_converged


def _seed_result(view: SeedView) -> SeedResult:
    energy = view.telemetry.energy.joules if view.telemetry is not None else None
    return seed_result(view.seed, view.record, energy)


def seed_result(seed: int, record: RunRecord, energy_j: float | None = None) -> SeedResult:
    """One stored seed as a comparison takes it (a converged run needs a time to count as one)."""
    converged = record.converged and bool(record.time_to_train_ms)
    return SeedResult(
        seed=seed,
        converged=converged,
        time_to_train_ms=float(record.time_to_train_ms) if record.time_to_train_ms is not None else None,
        epochs_to_target=record.epochs_to_target if converged and record.epochs_to_target else None,
        samples_per_epoch=record.samples_per_epoch,
        energy_j=energy_j,
    )


def accelerators_of(manifest: Manifest) -> tuple[str | None, int | None]:
    """The accelerator model and count of a run: an import's system description, else the GPUs the
    run's system capture saw (None on a CPU)."""
    imported = manifest.imported
    if imported is not None and imported.system_description:
        return described_accelerators(imported.system_description)
    gpus = manifest.system.get("gpus") or {}
    devices = gpus.get("devices", []) if gpus.get("available") else []
    names = [d.get("name") for d in devices if isinstance(d.get("name"), str)]
    return (sorted(set(names))[0], len(names)) if names else (None, None)


def hardware_of(manifest: Manifest) -> str:
    """`hardware_summary` of a run; an import's system description where it has one."""
    accelerator, count = accelerators_of(manifest)
    if manifest.imported is not None and accelerator:
        return f"{count}x {accelerator}" if count else accelerator
    return hardware_summary(manifest.system)


def hardware_summary(system: dict[str, Any]) -> str:
    """'2x NVIDIA A100-SXM4-80GB' or 'CPU: <model> (<n> usable CPUs)'."""
    gpus = system.get("gpus") or {}
    devices = gpus.get("devices", []) if gpus.get("available") else []
    names = [d.get("name") for d in devices if isinstance(d.get("name"), str)]
    if names:
        distinct = sorted(set(names))
        return ", ".join(f"{names.count(n)}x {n}" for n in distinct)
    host = system.get("host") or {}
    model = host.get("cpu_model")
    if not model or is_unavailable(model):
        return "unknown"
    return f"CPU: {model} ({host.get('usable_cpus', '?')} usable CPUs)"


# ---------------------------------------------------------------- published results beside yours


def published_setup(system: published.PublishedSystem) -> Setup:
    """A published result as a setup: its converged runs' times and epochs, its non-converged
    count, its scaling factor; labelled as published."""
    per_epoch = published.TRAIN_SAMPLES.get(system.benchmark)
    seeds = [SeedResult(seed=i, converged=True, time_to_train_ms=minutes * 60000, epochs_to_target=epochs or None,
                        samples_per_epoch=per_epoch)
             for i, (minutes, epochs) in enumerate(zip(system.run_minutes, system.run_epochs, strict=True))]
    seeds += [SeedResult(seed=len(seeds) + i, converged=False, time_to_train_ms=None)
              for i in range(system.nonconverged)]
    return Setup(
        name=f"published {system.name}", seeds=tuple(seeds), drop_per_end=system.drop_per_end,
        max_non_converged=system.drop_per_end, hardware=system.hardware,
        run_ids=(f"MLCommons training_results_{system.round}/{system.submitter}/results/{system.system}"
                 f"/{system.benchmark}",),
        scaling_factor=system.scaling_factor, benchmark=system.benchmark, accelerator=system.accelerator,
        accelerators=system.accelerators, published=True,
    )


def published_beside(setups: Sequence[Setup], query: str, *,
                     table: Sequence[published.PublishedSystem] | None = None,
                     shown: int = PUBLISHED_SHOWN) -> tuple[list[Setup], list[str]]:
    """Published results to place beside the user's setups, and sentences saying what matched:
    ``query`` is BENCHMARK[:ACCELERATOR[:COUNT]], or ``auto`` for the systems like each setup (its
    benchmark, accelerator family and count)."""
    systems = published.load() if table is None else list(table)
    queries = [published.parse_query(query)] if query != AUTO else _auto_queries(setups)
    chosen: dict[str, Setup] = {}
    sentences = []
    for one in queries:
        found = published.matching(systems, one)
        if not found:
            sentences.append(published.no_match_sentence(systems, one))
            continue
        more = f" (the {shown} fastest shown)" if len(found) > shown else ""
        sentences.append(f"{len(found)} published result(s) of {one}{more}")
        for system in found[:shown]:
            setup = published_setup(system)
            chosen.setdefault(setup.name, setup)
    return list(chosen.values()), sentences


def _auto_queries(setups: Sequence[Setup]) -> list[published.Query]:
    queries = []
    for setup in setups:
        if setup.published:
            continue
        if setup.benchmark not in published.DROP_PER_END:
            raise UsageError(f"--published auto: setup {setup.name!r} runs {setup.benchmark!r}, which has no"
                             f" published results here (the table holds {', '.join(sorted(published.DROP_PER_END))})")
        family = published.accelerator_class(setup.accelerator) or setup.accelerator
        if family is None:
            raise UsageError(f"--published auto: setup {setup.name!r} ran on a CPU; name what to compare with,"
                             " e.g. --published unet3d:H100:8")
        query = published.Query(setup.benchmark, family, setup.accelerators)
        if query not in queries:
            queries.append(query)
    return queries
