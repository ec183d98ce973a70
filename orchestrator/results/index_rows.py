"""A training run's index rows (one row for the run, one per seed), built from its records, and
kept beside them in its folder (`rows.json`, written with every write of the run), stamped with the
time of the files they were built from (`results.refresh.run_mtime`).

A listing of a folder with no index (the first, or after the index was deleted) reads this one
file a run instead of every record of every seed: at 10,000 runs, 10,000 small files, not 80,000;
the seeds it names are those whose files the run's time is taken from (`seeds_of`: no listing of
the run's seed folders).
The rows are a cache, as the index is: they are used only where their stamp is the run's time now,
they name the run's own folder, neither the run folder nor a seed folder is a link (a link's target
is checked by reading the run whole), and no seed folder changed after the rows were written (a
folder's time moves with each file made, removed or renamed in it: a telemetry series added or
removed, a record moved away; each of mltrain's writes is one, and writes the rows after it; where
a folder's time is the rows' own, within one tick of the clock, each series is looked for); rows
that are missing (a run of an older mltrain), of another index schema, damaged, or older than the
files, leave the run to be read whole."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, NamedTuple

from pydantic import Field

from orchestrator.config.numbers import Finite
from orchestrator.errors import StoreError, StoreWriteError
from orchestrator.results import atomic
from orchestrator.results.paths import DECISIONS_NAME, ROWS_NAME, TELEMETRY_NAME
from orchestrator.results.record_base import Record
from orchestrator.results.record_reader import read_cache_stat
from orchestrator.results.records import Manifest, RunRecord, SeedState, SeedStateName, Summary

SCHEMA_VERSION = 6
"""The index's tables' version (`results.index`), bumped whenever they change: an index of another
version is dropped and rebuilt, and rows of another version are not used."""
_INT64_MAX = 2**63 - 1

Int64 = Annotated[int, Field(ge=-_INT64_MAX - 1, le=_INT64_MAX)]
"""An INTEGER cell: SQLite holds 64-bit integers."""


class RunRow(NamedTuple):
    """A training run's row as the index holds it (its columns, in the table's order), each cell of
    its column's type: kept rows whose cells are not (a file damaged, or written by hand) are not used,
    rather than shown, compared and drawn as what they say."""

    run_id: str
    workload: str | None
    benchmark: str | None
    profile: str | None
    label: str | None
    runner: str | None
    host: str | None
    started_at: str | None
    ended_at: str | None
    state: str | None
    seeds: Int64 | None
    converged: Int64 | None
    valid: Int64 | None
    score_ms: Finite | None
    scaled_score_ms: Finite | None
    reason: str | None
    kind: str | None
    scenario: str | None
    metric: Finite | None
    metric_unit: str | None
    drop_per_end: Int64 | None
    max_non_converged: Int64 | None
    scaling_factor: Finite | None
    synced_mtime: Finite | None
    """The run's time (`run_mtime`) its rows were built at."""


class SeedRow(NamedTuple):
    """A seed's row as the index holds it (its columns, in the table's order): what a comparison
    takes of a seed without opening its run (`Index.seeds_of`); each cell of its column's type, as
    `RunRow`'s."""

    run_id: str
    seed: Int64
    state: str
    status: str | None
    time_to_train_ms: Int64 | Finite | None
    epochs_to_target: Finite | None
    reason: str | None
    samples_per_epoch: Int64 | None
    global_batch_size: Int64 | None
    telemetry: Int64
    """1 where the seed has a telemetry series."""
    host: str | None
    """The verdict on its host (`insight.quiet`), as its record holds it."""
    host_reason: str | None
    energy_j: Finite | None
    judged: Int64
    """1 where its record holds the verdict on its host and, with telemetry, its energy."""


RUN_COLUMNS = len(RunRow._fields)
SEED_COLUMNS = len(SeedRow._fields)
"""The seeds table's columns (`SeedRow`'s fields)."""


class IndexRows(Record):
    """`rows.json`: a training run's rows as the index holds them."""

    schema_version: int
    stamp: float
    """The run's time (`run_mtime`) when the rows were built."""
    run: RunRow
    seeds: tuple[SeedRow, ...]

    def fits(self, run_id: str, stamp: float) -> bool:
        """Rows of this schema, of the run ``run_id`` as it stands at ``stamp``."""
        return (self.schema_version == SCHEMA_VERSION and self.stamp == stamp and self.run.run_id == run_id
                and all(row.run_id == run_id for row in self.seeds)
                and len({row.seed for row in self.seeds}) == len(self.seeds))  # a seed once: the table's key


def build(manifest: Manifest, summary: Summary | None, states: dict[int, SeedState], records: dict[int, RunRecord],
          stamp: float, *, telemetry: frozenset[int] = frozenset()) -> IndexRows:
    """A run's rows (``telemetry``: the seeds that have a telemetry series)."""
    m, s = manifest, summary
    scaling = s.mlcommons.scaling_factor if s is not None and s.mlcommons is not None else 1.0
    run = RunRow(
        m.run_id, m.workload, m.benchmark, m.profile, m.label, m.runner, m.host, m.started_at,
        m.ended_at, m.state, len(m.seeds), s.converged if s else None,
        None if s is None else int(s.valid), s.score_ms if s else None,
        s.scaled_score_ms if s else None, s.reason if s else None, "training", None, None, None,
        m.rule.drop_per_end, m.rule.max_non_converged, scaling, stamp,
    )
    seeds = tuple(_seed_row(m.run_id, seed, states.get(seed), records.get(seed), seed in telemetry)
                  for seed in m.seeds)
    # built from records already validated, not validated again: a cache that cannot fail the run's write
    # (rows a reader would not take are read whole there)
    return IndexRows.model_construct(schema_version=SCHEMA_VERSION, stamp=stamp, run=run, seeds=seeds)


def save(folder: Path, rows: IndexRows) -> str:
    """Keep ``rows`` in the run's folder; a cache, so a write that fails does not fail the run (it
    is read whole at the next first listing). Returns why it could not be written, or ''."""
    try:
        atomic.write_json(folder / ROWS_NAME, rows.to_json())
    except (StoreError, StoreWriteError) as exc:  # a full disk; a link or a folder where the file belongs
        return f"{exc}: the run is read whole at the next listing without an index"
    return ""


class Kept(NamedTuple):
    """A run's kept rows as its folder holds them, unchecked (`usable` checks them)."""

    rows: IndexRows
    mtime: float
    """The time of `rows.json` (a seed folder changed after it leaves the rows unused)."""


def kept(folder: str) -> Kept | None:
    """The rows kept in a run's ``folder``, and their file's time; None where there are none, or
    none that can be read."""
    found = read_cache_stat(f"{folder}/{ROWS_NAME}", IndexRows)  # (no Path: one a run, thousands of runs)
    return None if found is None else Kept(found[0], found[1].st_mtime)


def seeds_of(kept: Kept) -> list[int]:
    """The seeds the kept rows hold (the manifest's when they were built: a run that gains a seed
    rewrites its manifest, so rows that name the wrong seeds have another stamp than the run's)."""
    return [row.seed for row in kept.rows.seeds]


def usable(folder: str, run_id: str, stamp: float, kept: Kept, seed_folders_at: float | None, *,
           is_link: bool) -> IndexRows | None:
    """The kept rows of the run in ``folder``, where they may stand for it (see the module's text);
    None where the run must be read whole. ``stamp``: the run's time now (`run_mtime`);
    ``seed_folders_at``: the newest time of its seed folders, None where one is a link or no folder
    (`results.refresh.seed_folders_time`); ``is_link``: whether the run folder is a link."""
    if is_link or seed_folders_at is None or seed_folders_at > kept.mtime or not kept.rows.fits(run_id, stamp):
        return None
    if seed_folders_at == kept.mtime and not _series_as_kept(folder, kept.rows):
        return None
    # a decided run's seed order is checked by reading the run whole; asked without a status or an
    # error built (0.6 us here, an lstat that fails 1.5 us; a run at a time): the folder was read, its rows found
    if os.access(f"{folder}/{DECISIONS_NAME}", os.F_OK, follow_symlinks=False):
        return None
    return kept.rows


def _series_as_kept(folder: str, rows: IndexRows) -> bool:
    """Each seed's telemetry series is where the rows say: asked where a seed folder's time is the
    rows' own (both written within one tick of the file system's clock, as a run's last write does,
    and a file made or removed within that tick would keep it)."""
    return all(os.path.isfile(f"{folder}/seeds/{row.seed}/{TELEMETRY_NAME}") == bool(row.telemetry)
               for row in rows.seeds)


def _seed_row(run_id: str, seed: int, state: SeedState | None, record: RunRecord | None,
              telemetry: bool) -> SeedRow:
    """A seed's row. ``judged``: its record holds the verdict on its host and, where it has telemetry,
    its energy (a record of an older mltrain does not: its run is read whole to compare it)."""
    host = record.quiet_host if record else None
    energy = record.energy if record else None
    return SeedRow(
        run_id, seed, (state.state if state else SeedStateName.PENDING).value,
        record.status.value if record else None,
        _integer(record.time_to_train_ms) if record else None,
        record.epochs_to_target if record else None,
        record.reason if record else None,
        _integer(record.samples_per_epoch) if record else None,
        _integer(record.global_batch_size) if record else None,
        int(telemetry),
        host.verdict if host else None,
        host.reason if host else None,
        energy.joules if energy else None,
        int(record is not None and host is not None and (energy is not None or not telemetry)),
    )


def _integer(value: int | float | None) -> int | float | None:
    """SQLite holds 64-bit integers; a larger value (a hostile log) is kept out of the cache."""
    return value if value is None or abs(value) <= _INT64_MAX else None
