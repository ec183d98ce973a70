"""The SQLite index of a results folder: one row per run and per seed, for fast listing.

A cache, never the truth: every row is rebuilt from the run folders (`orchestrator.results.store`)
whenever they are newer than what the index holds, and the file can be deleted at any time. Only
a command that writes a run makes the file; a listing without one is built in memory
(`Index.in_memory`), so that reading a results folder never writes to it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

from orchestrator.errors import StoreError
from orchestrator.results.inference import InferenceRun
from orchestrator.results.paths import INDEX_NAME
from orchestrator.results.records import Manifest, RunRecord, SeedState, SeedStateName, Summary

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY, workload TEXT, benchmark TEXT, profile TEXT, label TEXT, runner TEXT,
    host TEXT, started_at TEXT, ended_at TEXT, state TEXT, seeds INTEGER, converged INTEGER,
    valid INTEGER, score_ms REAL, scaled_score_ms REAL, reason TEXT, kind TEXT, scenario TEXT,
    metric REAL, metric_unit TEXT, synced_mtime REAL
);
CREATE TABLE IF NOT EXISTS seeds (
    run_id TEXT, seed INTEGER, state TEXT, status TEXT, time_to_train_ms INTEGER,
    epochs_to_target REAL, reason TEXT, PRIMARY KEY (run_id, seed)
);
"""
_INT64_MAX = 2**63 - 1


class Index:
    """The index file of one results folder. Opened per operation (one transaction each)."""

    def __init__(self, results_dir: Path) -> None:
        self.results_dir = results_dir
        self.path = results_dir / INDEX_NAME
        self._memory: sqlite3.Connection | None = None

    @classmethod
    def in_memory(cls, results_dir: Path) -> Index:
        """An index of the same shape that lives in this process only (nothing is written)."""
        index = cls(results_dir)
        index._memory = sqlite3.connect(":memory:")
        index._memory.executescript(_SCHEMA)
        index._memory.row_factory = sqlite3.Row
        return index

    @property
    def exists(self) -> bool:
        return self._memory is not None or self.path.exists()

    @contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        if self._memory is not None:
            with self._memory:
                yield self._memory
            return
        try:
            self.results_dir.mkdir(parents=True, exist_ok=True)
            with closing(sqlite3.connect(self.path, timeout=30)) as db:
                db.executescript(_SCHEMA)
                if "kind" not in {row[1] for row in db.execute("PRAGMA table_info(runs)")}:
                    db.executescript("DROP TABLE runs; DROP TABLE seeds;" + _SCHEMA)  # older cache: rebuilt
                db.row_factory = sqlite3.Row
                with db:  # one transaction
                    yield db
        except sqlite3.Error as exc:
            raise StoreError(f"index {self.path}: {exc} (it is a cache: delete it and it is rebuilt)") from None
        except OSError as exc:
            raise StoreError(f"results folder {self.results_dir}: {exc.strerror}") from None

    def synced(self) -> dict[str, float]:
        """run id -> the folder time its rows were written from."""
        if not self.exists:
            return {}
        with self._db() as db:
            return {row["run_id"]: row["synced_mtime"] for row in db.execute("SELECT run_id, synced_mtime FROM runs")}

    def write(
        self,
        manifest: Manifest,
        summary: Summary | None,
        states: dict[int, SeedState],
        records: dict[int, RunRecord],
        mtime: float,
    ) -> None:
        """Replace one run's rows."""
        m, s = manifest, summary
        with self._db() as db:
            db.execute("DELETE FROM seeds WHERE run_id = ?", (m.run_id,))
            db.execute(
                "INSERT OR REPLACE INTO runs VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    m.run_id, m.workload, m.benchmark, m.profile, m.label, m.runner, m.host, m.started_at,
                    m.ended_at, m.state, len(m.seeds), s.converged if s else None,
                    None if s is None else int(s.valid), s.score_ms if s else None,
                    s.scaled_score_ms if s else None, s.reason if s else None, "training", None, None, None, mtime,
                ),
            )
            for seed in m.seeds:
                record = records.get(seed)
                state = states.get(seed)
                db.execute(
                    "INSERT INTO seeds VALUES (?,?,?,?,?,?,?)",
                    (
                        m.run_id, seed, (state.state if state else SeedStateName.PENDING).value,
                        record.status.value if record else None,
                        _integer(record.time_to_train_ms) if record else None,
                        record.epochs_to_target if record else None,
                        record.reason if record else None,
                    ),
                )

    def write_inference(self, run: InferenceRun, mtime: float) -> None:
        """Replace one inference run's row: the model as its workload, the scenario's metric as its score."""
        result = run.result
        perf = result.performance if result else None
        reason = "; ".join(result.reasons) if result else run.failure
        with self._db() as db:
            db.execute("DELETE FROM seeds WHERE run_id = ?", (run.run_id,))
            db.execute(
                "INSERT OR REPLACE INTO runs VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    run.run_id, run.model, run.model, run.profile, run.label, run.runner, run.host, run.started_at,
                    run.ended_at, run.state, None, None, None if result is None else int(result.valid), None, None,
                    reason, "inference", run.scenario, perf.value if perf else None, perf.unit if perf else None,
                    mtime,
                ),
            )

    def forget(self, run_ids: set[str]) -> None:
        if not run_ids or not self.exists:
            return
        with self._db() as db:
            for run_id in run_ids:
                db.execute("DELETE FROM runs WHERE run_id = ?", (run_id,))
                db.execute("DELETE FROM seeds WHERE run_id = ?", (run_id,))

    def runs(self, *, label: str | None = None, workload: str | None = None) -> list[dict[str, Any]]:
        """Run rows, newest first."""
        query = ("SELECT * FROM runs WHERE (? IS NULL OR label = ?) AND (? IS NULL OR workload = ?)"
                 " ORDER BY started_at DESC, run_id DESC")
        with self._db() as db:
            rows = db.execute(query, (label, label, workload, workload)).fetchall()
        listed = [dict(row) for row in rows]
        for row in listed:
            del row["synced_mtime"]
        return listed

    def seeds(self, run_id: str) -> list[dict[str, Any]]:
        with self._db() as db:
            rows = db.execute("SELECT * FROM seeds WHERE run_id = ? ORDER BY seed", (run_id,)).fetchall()
        return [dict(row) for row in rows]


def _integer(value: int | None) -> int | None:
    """SQLite holds 64-bit integers; a larger value (a hostile log) is kept out of the cache."""
    return value if value is None or abs(value) <= _INT64_MAX else None
