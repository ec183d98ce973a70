"""A first listing (no index yet) builds the index from the rows each run's last write kept
(`rows.json`), one file a run, not every record of every seed (13.7 s of CPU at 10,000 runs); rows
that do not stand for the run as it is now leave it to be read whole, as before."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from pathlib import Path

import pytest

from orchestrator.results.index_rows import RUN_COLUMNS, SEED_COLUMNS, IndexRows, RunRow, SeedRow
from orchestrator.results.paths import ROWS_NAME
from orchestrator.results.record_reader import read_cache_stat, read_record
from orchestrator.results.store import Store
from tests.hardware.stored_runs import make_run


def _index(results: Path) -> tuple[list[tuple], list[tuple]]:
    with sqlite3.connect(results / "index.db") as db:
        return (db.execute("SELECT * FROM runs ORDER BY run_id").fetchall(),
                db.execute("SELECT * FROM seeds ORDER BY run_id, seed").fetchall())


def _store(tmp_path: Path) -> tuple[Path, list[str]]:
    results = tmp_path / "results"
    run_ids = [make_run(results, label=label, seeds=[1, 2, 3], power_w=300.0, other_cpu_pct=1.0, run_id=f"run-{n}")
               for n, label in enumerate(("a", "a", "b"))]
    (results / "index.db").unlink()
    return results, run_ids


def _opened(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    opened: list[str] = []
    real_open = Store.open
    monkeypatch.setattr(Store, "open", lambda self, run_id: opened.append(run_id) or real_open(self, run_id))
    return opened


def test_a_first_listing_reads_the_kept_rows_and_opens_no_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    results, run_ids = _store(tmp_path)
    opened = _opened(monkeypatch)
    listing = Store(results).list()
    assert opened == [] and not listing.broken
    from_rows = _index(results)
    monkeypatch.undo()
    for run_id in run_ids:  # the same folders as an older mltrain left them: each run read whole
        (results / run_id / ROWS_NAME).unlink()
    (results / "index.db").unlink()
    assert Store(results).list().rows == listing.rows
    assert _index(results) == from_rows
    assert len(from_rows[1]) == 9 and all(row[-1] == 1 for row in from_rows[1])  # judged: compare opens none


def test_kept_rows_read_in_one_pass_are_those_the_records_reader_reads(tmp_path: Path):
    """`read_cache_stat` validates the bytes as they are parsed (pydantic's JSON mode), the records'
    reader the values parsed first: the same rows, each cell of the same type, and the file's time."""
    results, run_ids = _store(tmp_path)
    for run_id in run_ids:
        path = results / run_id / ROWS_NAME
        found = read_cache_stat(str(path), IndexRows)
        assert found is not None
        rows, info = found
        read = read_record(path, IndexRows)
        assert read is not None and rows == read and info.st_mtime == path.stat().st_mtime
        assert _cell_types(rows) == _cell_types(read)
    assert read_cache_stat(str(tmp_path / "none.json"), IndexRows) is None


def _cell_types(rows: IndexRows) -> list[type]:
    return [type(cell) for cell in [*rows.run, *(cell for seed in rows.seeds for cell in seed)]]


def test_rows_older_than_the_run_s_files_are_not_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A record changed after the rows were kept (by hand, by an older mltrain) is what the index shows."""
    results, run_ids = _store(tmp_path)
    state = results / run_ids[1] / "seeds" / "2" / "state.json"
    changed = json.loads(state.read_text()) | {"state": "interrupted"}
    state.write_text(json.dumps(changed))
    os.utime(state, (state.stat().st_atime, state.stat().st_mtime + 5))
    opened = _opened(monkeypatch)
    Store(results).list()
    assert opened == [run_ids[1]]
    seeds = {(row[0], row[1]): row[2] for row in _index(results)[1]}
    assert seeds[(run_ids[1], 2)] == "interrupted" and seeds[(run_ids[0], 2)] == "finished"


@pytest.mark.parametrize("damage", ["copied", "garbage", "nested deep", "a FIFO", "other schema", "telemetry gone",
                                    "telemetry gone within the rows' tick", "file made in a seed",
                                    "seed not a folder", "seed twice", "cells of other types", "seed link",
                                    "run link", "decided"])
def test_rows_that_do_not_stand_for_the_run_leave_it_to_be_read_whole(tmp_path: Path, damage: str,
                                                                      monkeypatch: pytest.MonkeyPatch):
    results, run_ids = _store(tmp_path)
    folder = results / run_ids[0]
    rows = folder / ROWS_NAME
    stamp = os.stat(rows).st_mtime
    if damage == "copied":  # a run folder copied under a new name: its rows (and manifest) name the other
        shutil.copytree(folder, results / "run-copy")
        read = "run-copy"
    elif damage in ("garbage", "other schema"):
        kept = json.loads(rows.read_text())
        rows.write_text("{not json" if damage == "garbage" else json.dumps(kept | {"schema_version": 1}))
        os.utime(rows, (stamp, stamp))
        read = run_ids[0]
    elif damage == "nested deep":  # deeper than the parser goes: it stops there, it does not recurse
        rows.write_text("[" * 100_000 + "]" * 100_000)
        os.utime(rows, (stamp, stamp))
        read = run_ids[0]
    elif damage == "a FIFO":  # opened without waiting, and not read: no regular file
        rows.unlink()
        os.mkfifo(rows)
        read = run_ids[0]
    elif damage == "telemetry gone":  # a series is no file of the run's time: the rows must agree with it
        (folder / "seeds" / "1" / "telemetry.json").unlink()
        read = run_ids[0]
    elif damage == "telemetry gone within the rows' tick":  # the folder's time is the rows' own: each series looked for
        seed = folder / "seeds" / "1"
        (seed / "telemetry.json").unlink()
        os.utime(seed, (stamp, stamp))
        read = run_ids[0]
    elif damage == "file made in a seed":  # its folder's time moves past the rows' (a series added by hand)
        (folder / "seeds" / "3" / "notes.txt").write_text("re-run on another node\n")
        read = run_ids[0]
    elif damage == "seed not a folder":  # the run's time is as before (no files of the seed's): its folder says
        shutil.rmtree(folder / "seeds" / "3")
        (folder / "seeds" / "3").write_text("")
        read = run_ids[0]
    elif damage == "cells of other types":  # a score, a seed's time: what list, compare and report compute with
        kept = json.loads(rows.read_text())
        kept["run"][13], kept["seeds"][0][4] = "abc", "x"
        rows.write_text(json.dumps(kept))
        os.utime(rows, (stamp, stamp))
        read = run_ids[0]
    elif damage == "seed twice":  # a seed is the seeds table's key with its run: rows naming one twice
        kept = json.loads(rows.read_text())
        rows.write_text(json.dumps(kept | {"seeds": [*kept["seeds"], kept["seeds"][0]]}))
        os.utime(rows, (stamp, stamp))
        read = run_ids[0]
    elif damage == "seed link":  # the slow path's check: a seed folder that is a link out of its run
        seed = folder / "seeds" / "2"
        seed.rename(tmp_path / "seed-2-elsewhere")
        seed.symlink_to(tmp_path / "seed-2-elsewhere")
        read = run_ids[0]
    elif damage == "decided":  # a decided run's seed order is checked in its records (a link, even one to nothing)
        (folder / "decisions.json").symlink_to(tmp_path / "nowhere.json")
        read = run_ids[0]
    else:
        shutil.move(folder, tmp_path / run_ids[0])
        folder.symlink_to(tmp_path / run_ids[0])
        read = run_ids[0]
    opened = _opened(monkeypatch)
    listing = Store(results).list()
    assert opened == [read], opened
    if damage in ("copied", "seed not a folder", "seed link", "run link"):  # what reading the run whole finds
        problem = {"copied": "is not its folder's name", "seed not a folder": "Not a directory"}.get(damage, "outside")
        assert [b.run_id for b in listing.broken] == [read] and problem in listing.broken[0].problem
    else:
        assert not listing.broken and read in {row["run_id"] for row in listing.rows}


def test_a_first_listing_takes_each_run_s_seeds_from_its_kept_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The seeds the rows name are the files the run's time is taken from: no run's seed folder is
    listed (at 10,000 runs, 10,000 listings: a third of a first listing's CPU)."""
    from orchestrator.results import refresh

    results, run_ids = _store(tmp_path)
    listed: list[str] = []
    real = os.scandir
    monkeypatch.setattr(refresh.os, "scandir", lambda path=".": listed.append(str(path)) or real(path))
    listing = Store(results).list()
    assert sorted(r["run_id"] for r in listing.rows) == run_ids and not listing.broken
    assert [path for path in listed if path.endswith("/seeds")] == []


def test_a_seed_row_names_the_seeds_table_s_columns_in_their_order(tmp_path: Path):
    """`Index.seeds_of` hands out each seed's row as a `SeedRow`: a column added, dropped or moved
    in the table would otherwise be read under another column's name."""
    results, run_ids = _store(tmp_path)
    listing = Store(results).list()
    with sqlite3.connect(results / "index.db") as db:
        columns = tuple(row[1] for row in db.execute("PRAGMA table_info(seeds)"))
        run_columns = tuple(row[1] for row in db.execute("PRAGMA table_info(runs)"))
    assert SeedRow._fields == columns and len(columns) == SEED_COLUMNS
    assert RunRow._fields == run_columns and len(run_columns) == RUN_COLUMNS  # each kept cell typed as its column
    assert listing.index is not None
    rows = listing.index.seeds_of([run_ids[2], run_ids[0]])
    assert [row.seed for row in rows[run_ids[0]]] == [1, 2, 3] and rows[run_ids[0]][0].run_id == run_ids[0]
    assert tuple(rows[run_ids[2]][1]) == _index(results)[1][7]  # run-2's second seed, as the table holds it


def test_the_seeds_of_a_few_runs_or_of_most_are_the_table_s_rows_of_those_runs(tmp_path: Path):
    """`Index.seeds_of` reads most of the index in one pass and a few runs through a join: the same
    rows either way, and none of a run not asked for (nor of one the index does not hold)."""
    results, run_ids = _store(tmp_path)
    index = Store(results).list().index
    assert index is not None
    table = _index(results)[1]
    every = index.seeds_of([*run_ids, "run-gone"])  # most: one pass
    assert [tuple(row) for run_id in run_ids for row in every[run_id]] == table and every["run-gone"] == []
    for run_id in run_ids:  # a third of the runs: the join
        few = index.seeds_of([run_id])
        assert list(few) == [run_id] and few[run_id] == every[run_id]
    most = index.seeds_of(run_ids[:2])  # two of three: one pass, the third left out
    assert list(most) == run_ids[:2] and [row for rows in most.values() for row in rows] == \
        [row for run_id in run_ids[:2] for row in every[run_id]]


def test_kept_rows_holding_an_integer_sqlite_cannot_hold_are_listed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """An integer past 64 bits in kept rows (by hand: mltrain keeps none) is read as the float its
    column takes, not an overflow that stopped the listing (an internal error, nothing listed)."""
    results, run_ids = _store(tmp_path)
    rows = results / run_ids[1] / ROWS_NAME
    stamp = os.stat(rows).st_mtime
    kept = json.loads(rows.read_text())
    kept["seeds"][0][4] = 2**70  # the first seed's time to train
    rows.write_text(json.dumps(kept))
    os.utime(rows, (stamp, stamp))
    opened = _opened(monkeypatch)
    listing = Store(results).list()
    assert opened == [] and not listing.broken and len(listing.rows) == 3
    assert {(row[0], row[1]): row[4] for row in _index(results)[1]}[(run_ids[1], 1)] == float(2**70)


def test_a_listing_s_rows_hold_their_keys_in_the_order_json_writes_them(tmp_path: Path):
    """`list --json` sorts each row's keys: rows that come sorted are sorted in one pass."""
    results, _ = _store(tmp_path)
    rows = Store(results).list().rows
    assert rows and all(list(row) == sorted(row) for row in rows)


@pytest.mark.parametrize("count", [0, 1, 127, 128, 129, 300])
def test_rows_are_inserted_many_a_statement_every_one_once(count: int):
    from orchestrator.results.index import _insert

    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE t (a INTEGER PRIMARY KEY, b TEXT, c REAL)")
    rows = [(n, f"row {n}", n / 3) for n in range(count)]
    _insert(db, "INSERT INTO t", 3, rows)
    assert db.execute("SELECT * FROM t ORDER BY a").fetchall() == rows
