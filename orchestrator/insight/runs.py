"""Stored benchmark runs as comparison setups: group runs by label, read each seed's telemetry
(published MLPerf results as setups: `insight.published_setups`).

The one place that reads results folders for `compare`, `report` and `export`; everything
downstream works on the plain values built here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator import collector
from orchestrator.config.profiles import SMOKE
from orchestrator.errors import RecordError, UsageError
from orchestrator.insight import convergence, quiet
from orchestrator.insight.compare import SeedResult, Setup
from orchestrator.insight.setup_facts import facts_of
from orchestrator.insight.telemetry import load_node_series, load_series
from orchestrator.insight.telemetry_summary import SeedTelemetry, summarize
from orchestrator.insight.unavailable import is_unavailable
from orchestrator.mlperf import benchmarks
from orchestrator.mlperf.layout import accelerators as described_accelerators
from orchestrator.results.index_rows import SeedRow
from orchestrator.results.records import Manifest, RunRecord, RunStatus
from orchestrator.results.refresh import Listing
from orchestrator.results.store import Store
from orchestrator.results.stored_run import StoredRun


@dataclass(frozen=True)
class SeedView:
    """One seed of a stored run with its telemetry (if any)."""

    seed: int
    record: RunRecord
    telemetry: SeedTelemetry | None
    series: dict[str, Any] | None
    """The series of the host that sampled it (the submitting host's, for a seed a batch system ran)."""
    output_path: Path
    own_series: tuple[dict[str, Any], ...] = ()
    """The series of each system that ran the seed: the host's for a seed run here, else each node's that
    wrote one (never the submitting host's): what a plot draws beside the setup."""
    across_nodes: bool = False
    """Its nodes sampled themselves (a batch system ran it)."""


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


def chosen_runs(store: Store, run_ids: Sequence[str], labels: Sequence[str] = ()) -> tuple[list[str], Listing]:
    """The named runs plus every run carrying one of ``labels``, oldest first, without repeats, from
    one listing of the store (one refresh of its index, however many labels)."""
    if not run_ids and not labels:
        raise UsageError("name at least one run (RUN...) or --label")
    listing = store.list()
    broken = {b.run_id: b.problem for b in listing.broken}
    known = {row["run_id"] for row in listing.rows}
    chosen = dict.fromkeys(run_ids)  # an ordered set: runs named twice, or by a label too, count once
    for run_id in chosen:
        if run_id in broken:
            raise RecordError(broken[run_id])
        if run_id not in known:
            store.paths(run_id)  # a malformed id is named as such
            hint = f" (runs here: {', '.join(sorted(known)[-5:])})" if known else ""
            raise UsageError(f"no run {run_id!r} in {store.root}{hint}")
    for label in labels:
        found = [row["run_id"] for row in listing.rows if row["label"] == label]
        if not found:
            raise UsageError(f"no {'readable ' if broken else ''}run in {store.root} carries the label {label!r}"
                             + unreadable_runs(broken))
        chosen.update(dict.fromkeys(reversed(found)))
    return list(chosen), listing


def unreadable_runs(broken: dict[str, str]) -> str:
    """The runs a label may hide in, since their records cannot be read: the first one's problem, and how many."""
    if not broken:
        return ""
    which = "a run there cannot be read" if len(broken) == 1 else f"{len(broken)} runs there cannot be read, the first"
    return f"; {which}: {next(iter(broken.values()))}"


def load_runs(store: Store, run_ids: Sequence[str], labels: Sequence[str] = ()) -> list[RunView]:
    """The chosen runs (`chosen_runs`), each read whole with its telemetry (report, plots)."""
    chosen, _ = chosen_runs(store, run_ids, labels)
    return [view_of(store.open(run_id)) for run_id in chosen]


def load_setups(store: Store, chosen: Sequence[str], listing: Listing) -> list[Setup]:
    """The chosen runs (`chosen_runs`) as comparison setups, from the index's rows (each seed's time,
    host verdict and energy, as its record holds them): a run is opened only where its records
    predate that (an older mltrain's: energy and verdict read from the telemetry), and the first
    run of each setup's manifest for its hardware. The setups ``to_setups(load_runs(...))`` makes, in a
    fraction of the reads."""
    with collector.paused():  # a seed result per seed, no cycle among them
        runs = _pooled_from_index(store, chosen, listing)
    return setups_of(runs, lambda run_id: store.manifest(run_id))


def _pooled_from_index(store: Store, chosen: Sequence[str], listing: Listing) -> list[PooledRun]:
    rows = {row["run_id"]: row for row in listing.rows}
    seed_rows = listing.index.seeds_of(list(chosen)) if listing.index is not None else {}
    runs = []
    for run_id in chosen:
        row, seeds = rows[run_id], seed_rows.get(run_id, [])
        if row["kind"] != "training":
            raise UsageError(f"run {run_id} is an inference run: compare it with inference runs only")
        indexed = _indexed_seeds(seeds)
        if indexed is None:  # records of an older mltrain
            runs.append(_pooled(view_of(store.open(run_id))))
            continue
        finished, batch_sizes = indexed
        runs.append(PooledRun(
            run_id=run_id, setup_name=row["label"] or run_id, rule=(row["drop_per_end"], row["max_non_converged"]),
            scaling_factor=row["scaling_factor"] if row["scaling_factor"] is not None else 1.0,
            seeds=finished, batch_sizes=batch_sizes, profile=row["profile"],
        ))
    return runs


@dataclass(frozen=True, slots=True)
class PooledRun:
    """What a setup takes from one stored run (slotted, as `compare.SeedResult`: one a run)."""

    run_id: str
    setup_name: str
    rule: tuple[int, int]
    """(drop_per_end, max_non_converged)."""
    scaling_factor: float
    seeds: tuple[SeedResult, ...]
    """Its finished seeds."""
    batch_sizes: frozenset[int] = frozenset()
    """The global batch sizes its seeds' logs state (one, in a sound run)."""
    profile: str | None = None
    """The profile it was made with."""


def view_of(run: StoredRun) -> RunView:
    """A stored run's finished seeds with their telemetry summarised between run_start and run_stop
    (scored like `mltrain score`: only seeds that finished)."""
    seeds = []
    for seed, record in run.finished_records().items():
        paths = run.paths.seed(seed)
        series = _read_series(paths.telemetry)
        telemetry = None
        nodes = load_node_series(paths.node_telemetry, record.node_names)
        if (series is not None or nodes) and record.run_start_ms is not None and record.run_stop_ms is not None \
                and record.run_stop_ms > record.run_start_ms:
            telemetry = summarize(series, record.run_start_ms, record.run_stop_ms, nodes)
        own = tuple(n.series for _, n in sorted(nodes.items()) if n.series is not None) if nodes else (
            (series,) if series is not None else ())
        seeds.append(SeedView(seed, record, telemetry, series, paths.output, own, bool(nodes)))
    return RunView(run, tuple(seeds))


def _read_series(path: Path) -> dict[str, Any] | None:
    """The seed's telemetry (None where none was sampled); a damaged file is a RecordError."""
    if not path.is_file():
        return None
    return load_series(path)


def to_setups(runs: Sequence[RunView]) -> list[Setup]:
    """One setup per label (runs without a label stand alone), in order of first appearance."""
    by_id = {view.run_id: view.manifest for view in runs}
    return setups_of([_pooled(view) for view in runs], by_id.__getitem__)


def setups_of(runs: Sequence[PooledRun], manifest_of: Callable[[str], Manifest]) -> list[Setup]:
    """Pool runs into setups by name; every run of a setup must be scored by the same rule and
    scaling factor. ``manifest_of`` gives the first run's manifest (its hardware)."""
    groups: dict[str, list[PooledRun]] = {}
    for run in runs:
        groups.setdefault(run.setup_name, []).append(run)
    setups = []
    for name, members in groups.items():
        rules = {run.rule for run in members}
        if len(rules) > 1:
            raise UsageError(f"setup {name!r} pools runs scored by different rules {sorted(rules)}: label them apart")
        profiles = {run.profile for run in members}
        if len(profiles) > 1:
            said = ", ".join(sorted(map(str, profiles)))
            raise UsageError(f"setup {name!r} pools runs of different profiles ({said}): label them apart")
        factors = {run.scaling_factor for run in members}
        if len(factors) > 1:
            raise UsageError(f"setup {name!r} pools runs with different RCP scaling factors {sorted(factors)}:"
                             " label them apart")
        drop, max_failures = rules.pop()
        first = manifest_of(members[0].run_id)
        accelerator, count = accelerators_of(first)
        setups.append(Setup(
            name=name,
            seeds=tuple(seed for run in members for seed in run.seeds),
            drop_per_end=drop,
            max_non_converged=max_failures,
            hardware=hardware_of(first),
            run_ids=tuple(run.run_id for run in members),
            scaling_factor=factors.pop(),
            benchmark=first.benchmark,
            accelerator=accelerator,
            accelerators=count,
            reference=_reference(members, first),
            profile=profiles.pop(),
            facts=facts_of(first),
        ))
    return setups


def _pooled(view: RunView) -> PooledRun:
    rule = view.manifest.rule
    summary = view.run.summary
    factor = summary.mlcommons.scaling_factor if summary is not None and summary.mlcommons is not None else 1.0
    return PooledRun(run_id=view.run_id, setup_name=view.setup_name, rule=(rule.drop_per_end, rule.max_non_converged),
                     scaling_factor=factor, seeds=tuple(_seed_result(s) for s in view.seeds),
                     batch_sizes=frozenset(s.record.global_batch_size for s in view.seeds
                                           if s.record.global_batch_size), profile=view.manifest.profile)


def _reference(members: Sequence[PooledRun], first: Manifest) -> convergence.Reference | None:
    """The RCP for the runs' one batch size (and samples per epoch), by the ruleset their first run
    was checked under (an import's round, else the workload's, else the benchmark's default); None
    where the runs differ in either or the table has no point for them."""
    sizes = frozenset().union(*(run.batch_sizes for run in members))
    per_epoch = {s.samples_per_epoch for run in members for s in run.seeds if s.samples_per_epoch}
    if len(sizes) != 1 or len(per_epoch) > 1 or not first.benchmark or not benchmarks.is_known(first.benchmark):
        return None
    ruleset = first.imported.ruleset if first.imported is not None else first.ruleset
    try:
        ruleset = ruleset or benchmarks.get(first.benchmark).default_ruleset
    except UsageError:
        return None
    return convergence.reference_for(first.benchmark, ruleset, next(iter(sizes)),
                                     per_epoch.pop() if per_epoch else None)


def _seed_result(view: SeedView) -> SeedResult:
    energy = view.telemetry.energy.joules if view.telemetry is not None else None
    return seed_result(view.seed, view.record, energy, view.series)


NO_TELEMETRY = "not judged: no telemetry was sampled"


def _indexed_seeds(rows: list[SeedRow]) -> tuple[tuple[SeedResult, ...], frozenset[int]] | None:
    """A run's finished seeds from their index rows, as `seed_result` makes each from its record (and
    telemetry), and the global batch sizes its seeds state: one pass, each row unpacked once (its
    fields by name cost more than the rest: 300,000 seeds in a comparison of 100,000 runs). None where
    a seed has telemetry its record does not judge (an older mltrain's record): the run is read whole."""
    finished, sizes = [], set()
    for (_, seed, state, status, time_to_train_ms, epochs_to_target, _, samples_per_epoch, global_batch_size,
         telemetry, host, host_reason, energy_j, judged) in rows:
        if telemetry and not judged:
            return None
        if global_batch_size:
            sizes.add(global_batch_size)
        if state != "finished" or not status:
            continue
        converged = status == _CONVERGED and bool(time_to_train_ms)
        finished.append(SeedResult(
            seed=seed, converged=converged,
            time_to_train_ms=float(time_to_train_ms) if time_to_train_ms is not None else None,
            epochs_to_target=epochs_to_target if converged and epochs_to_target else None,
            samples_per_epoch=samples_per_epoch, energy_j=energy_j,
            host=host if host is not None else "unknown",
            host_reason=host_reason if host is not None else NO_TELEMETRY,
        ))
    return tuple(finished), frozenset(sizes)


_CONVERGED = RunStatus.CONVERGED.value


def seed_result(seed: int, record: RunRecord, energy_j: float | None = None,
                series: dict[str, Any] | None = None) -> SeedResult:
    """One stored seed as a comparison takes it (a converged run needs a time to count as one), with
    the verdict on its host: its record's, else its telemetry judged now (a record of an older mltrain)."""
    converged = record.converged and bool(record.time_to_train_ms)
    evidence = record.quiet_host or quiet.judge(series, record.run_start_ms, record.run_stop_ms)
    return SeedResult(
        seed=seed,
        converged=converged,
        time_to_train_ms=float(record.time_to_train_ms) if record.time_to_train_ms is not None else None,
        epochs_to_target=record.epochs_to_target if converged and record.epochs_to_target else None,
        samples_per_epoch=record.samples_per_epoch,
        energy_j=energy_j,
        host=evidence.verdict,
        host_reason=evidence.reason,
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


def check_profiles(setups: Sequence[Setup], *, force: bool = False) -> None:
    """Setups made with different profiles measure different things (a smoke run proves the pipeline
    and compares with nothing; qualify is no MLPerf result): UsageError unless ``force``. Published
    MLPerf results may stand beside qualify and mlperf setups (that is what --published asks for),
    never beside a smoke run."""
    if force:
        return
    own = {s.name: s.profile for s in setups if not s.published}
    if len(set(own.values())) > 1:
        said = ", ".join(f"{name}: {profile}" for name, profile in own.items())
        raise UsageError(f"the setups were made with different profiles ({said}) and are not comparable;"
                         " compare runs of one profile, or give --force to see the numbers anyway")
    if SMOKE in own.values() and any(s.published for s in setups):
        raise UsageError("a smoke run proves the pipeline and is comparable with nothing, a published MLPerf"
                         " result least of all; give --force to see the numbers anyway")
