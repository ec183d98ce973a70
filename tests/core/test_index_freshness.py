"""The index stands for the run folders without a system call per run where none changed (the results
folder's own time, `Index.unchanged`), and never shows a run as it was once it changed: a run copied in
or removed by hand, one written by mltrain whose rows the index could not take, one whose writer died
between its files and its rows, an index of another version, a run that could not be read."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import time
from pathlib import Path

import pytest

from orchestrator.results import refresh
from orchestrator.results.index import FILE_VERSION, Index, IndexBusy
from orchestrator.results.store import Store
from tests.hardware.stored_runs import make_run


def _settled(results: Path) -> None:
    """The results folder last changed a while ago, and a full check has seen it as it is."""
    past = time.time() - 60
    os.utime(results, (past, past))
    Store(results).list()


def _no_run_looked_at(monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(*args, **kwargs):
        raise AssertionError("every run's files looked at")

    monkeypatch.setattr(refresh, "_stamps", refused)


def _store(tmp_path: Path) -> tuple[Path, list[str]]:
    results = tmp_path / "results"
    run_ids = [make_run(results, label=label, seeds=[1, 2], power_w=300.0, run_id=f"run-{n}")
               for n, label in enumerate(("a", "b"))]
    return results, run_ids


def _states(results: Path) -> dict[str, str]:
    return {row["run_id"]: row["state"] for row in Store(results).list().rows}


def test_a_folder_that_did_not_change_is_listed_from_the_index_alone(tmp_path: Path, monkeypatch):
    results, run_ids = _store(tmp_path)
    _settled(results)
    listed = Store(results).list().rows
    _no_run_looked_at(monkeypatch)
    assert Store(results).list().rows == listed and sorted(r["run_id"] for r in listed) == run_ids


def test_a_run_copied_in_or_removed_by_hand_is_seen(tmp_path: Path, monkeypatch):
    results, run_ids = _store(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    make_run(elsewhere, label="c", seeds=[1], power_w=300.0, run_id="run-copied")
    _settled(results)
    shutil.copytree(elsewhere / "run-copied", results / "run-copied")
    assert _states(results) == {run_ids[0]: "finished", run_ids[1]: "finished", "run-copied": "finished"}
    _settled(results)
    shutil.rmtree(results / run_ids[0])
    assert set(_states(results)) == {run_ids[1], "run-copied"}


def test_a_write_the_index_could_not_take_is_seen(tmp_path: Path, monkeypatch):
    """A run resumed (or rescored) by mltrain while another process held the index: its files are
    written, its rows are not; the next read must not show the run as it was."""
    results, run_ids = _store(tmp_path)
    _settled(results)

    def busy(self, *rows):
        raise IndexBusy("held")

    with monkeypatch.context() as patch:
        patch.setattr(Index, "put", busy)
        run = Store(results).open(run_ids[0]).locked()
        run.save_manifest(run.manifest.model_copy(update={"state": "interrupted"}))
        run.close()
    assert "catches up" in run.index_note
    assert _states(results)[run_ids[0]] == "interrupted"


def test_a_running_run_whose_writer_died_before_its_rows_is_seen(tmp_path: Path):
    results, run_ids = _store(tmp_path)
    run = Store(results).open(run_ids[0]).locked()
    run.save_manifest(run.manifest.model_copy(update={"state": "running"}))
    _settled(results)
    folder_time = results.stat().st_mtime_ns
    manifest = results / run_ids[0] / "manifest.json"  # as its last write left it; the index never had it
    manifest.write_text(json.dumps(json.loads(manifest.read_text()) | {"state": "finished"}))
    os.utime(results, ns=(folder_time, folder_time))
    run.close()
    assert _states(results)[run_ids[0]] == "finished"


def test_an_index_of_another_version_is_rebuilt(tmp_path: Path, monkeypatch):
    """An older mltrain rebuilt the file as its own version, and wrote a row this one never saw."""
    results, run_ids = _store(tmp_path)
    _settled(results)
    folder_time = results.stat().st_mtime_ns
    with sqlite3.connect(results / "index.db") as db:
        db.execute("UPDATE runs SET state = 'running' WHERE run_id = ?", (run_ids[0],))
        db.execute("PRAGMA user_version = 6")
    os.utime(results, ns=(folder_time, folder_time))
    assert _states(results)[run_ids[0]] == "finished"
    with sqlite3.connect(results / "index.db") as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == FILE_VERSION


def test_a_run_that_could_not_be_read_is_named_at_every_read(tmp_path: Path):
    results, run_ids = _store(tmp_path)
    (results / run_ids[0] / "manifest.json").write_text("{")
    _settled(results)
    listing = Store(results).list()
    assert [b.run_id for b in listing.broken] == [run_ids[0]] and [r["run_id"] for r in listing.rows] == [run_ids[1]]


def test_reads_leave_the_results_folder_s_time_alone(tmp_path: Path):
    """SQLite's journal is kept (truncated), not made and removed at each write: a read that writes the
    index does not move the time that says whether a run folder came or went."""
    results, run_ids = _store(tmp_path)
    (results / "index.db").unlink()
    Store(results).list()  # made anew
    before = results.stat().st_mtime_ns
    (results / run_ids[0] / "summary.json").touch()  # changed by hand: the run's rows are written again
    Store(results).list()
    assert results.stat().st_mtime_ns == before


def test_a_read_writes_the_index_file_only_where_its_check_comes_to_stand(tmp_path: Path):
    """A read just after a write (within SETTLE_NS of the folder's time) saves no check that could not
    stand, and a read of a settled folder saves none again: a refused command beside a store leaves
    its index file as it was (before: every full check rewrote it)."""
    results, _ = _store(tmp_path)
    index = results / "index.db"

    def stamp() -> tuple[int, int]:
        return index.stat().st_size, index.stat().st_mtime_ns

    Store(results).list()  # the folder was written just now: the check cannot stand
    before = stamp()
    time.sleep(0.05)
    Store(results).list()
    assert stamp() == before
    _settled(results)  # saves the check that stands
    settled = stamp()
    time.sleep(0.05)
    Store(results).list()
    assert stamp() == settled
