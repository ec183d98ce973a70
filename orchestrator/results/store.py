"""The results store: one folder per benchmark run (the truth) and an SQLite index of runs and
seeds (a cache, rebuilt from the folders whenever they are newer than what it holds)."""

from __future__ import annotations

import json
import os
import secrets
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from orchestrator.errors import StoreError, UsageError
from orchestrator.results import atomic
from orchestrator.results.paths import INDEX_NAME, RunPaths, SeedPaths
from orchestrator.results.records import RunRecord

SEED_PENDING = "pending"
SEED_RUNNING = "running"
SEED_FINISHED = "finished"
SEED_INTERRUPTED = "interrupted"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY, workload TEXT, benchmark TEXT, profile TEXT, label TEXT, runner TEXT,
    host TEXT, started_at TEXT, ended_at TEXT, state TEXT, seeds INTEGER, converged INTEGER,
    valid INTEGER, score_ms REAL, reason TEXT, synced_mtime REAL
);
CREATE TABLE IF NOT EXISTS seeds (
    run_id TEXT, seed INTEGER, state TEXT, status TEXT, time_to_train_ms INTEGER,
    epochs_to_target REAL, reason TEXT, PRIMARY KEY (run_id, seed)
);
"""


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def check_results_dir(results_dir: Path) -> None:
    """The results folder must be a writable folder (it is made when missing)."""
    if results_dir.exists() and not results_dir.is_dir():
        raise StoreError(f"results folder {results_dir} is not a folder")
    probe = results_dir if results_dir.exists() else results_dir.parent
    if probe.exists() and not os.access(probe, os.R_OK | os.W_OK | os.X_OK):
        raise StoreError(f"results folder {probe} is not readable and writable by this user")


def new_run_id(workload: str, profile: str) -> str:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    return f"{workload}-{profile}-{stamp}-{secrets.token_hex(2)}"


@dataclass(frozen=True)
class StoredRun:
    """A benchmark run as it stands on disk."""

    paths: RunPaths
    manifest: dict[str, Any]
    summary: dict[str, Any] | None
    records: dict[int, RunRecord]
    """seed -> record, for seeds whose record exists."""
    states: dict[int, dict[str, Any]]
    """seed -> state.json content."""

    @property
    def run_id(self) -> str:
        return self.paths.run_id

    def unfinished_seeds(self) -> list[int]:
        return [s for s in self.manifest.get("seeds", []) if self.states.get(s, {}).get("state") != SEED_FINISHED]


def run_paths(results_dir: Path, run_id: str) -> RunPaths:
    if not run_id or "/" in run_id or run_id.startswith("."):
        raise UsageError(f"bad run id {run_id!r}")
    return RunPaths(results_dir / run_id)


def create_run(results_dir: Path, manifest: dict[str, Any]) -> RunPaths:
    paths = run_paths(results_dir, manifest["run_id"])
    try:
        paths.root.mkdir(parents=True, exist_ok=False)
    except FileExistsError:
        raise StoreError(f"run {paths.run_id} already exists in {results_dir}") from None
    except OSError as exc:
        raise StoreError(f"cannot create {paths.root}: {exc.strerror}") from None
    write_manifest(paths, manifest)
    for seed in manifest["seeds"]:
        write_seed_state(paths.seed(seed), {"seed": seed, "state": SEED_PENDING})
    return paths


def write_manifest(paths: RunPaths, manifest: dict[str, Any]) -> None:
    atomic.write_json(paths.manifest, manifest)


def write_seed_state(seed: SeedPaths, state: dict[str, Any]) -> None:
    seed.root.mkdir(parents=True, exist_ok=True)
    atomic.write_json(seed.state, state)


def write_record(seed: SeedPaths, record: RunRecord) -> None:
    atomic.write_json(seed.record, record.to_json())


def write_summary(paths: RunPaths, summary: dict[str, Any]) -> None:
    atomic.write_json(paths.summary, summary)


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise StoreError(f"{path}: unreadable ({exc})") from None


def open_run(results_dir: Path, run_id: str) -> StoredRun:
    paths = run_paths(results_dir, run_id)
    manifest = _read_json(paths.manifest)
    if manifest is None:
        known = [r["run_id"] for r in list_runs(results_dir)][:5] if results_dir.is_dir() else []
        hint = f" (recent: {', '.join(known)})" if known else ""
        raise UsageError(f"no run {run_id!r} in {results_dir}{hint}")
    records: dict[int, RunRecord] = {}
    states: dict[int, dict[str, Any]] = {}
    for seed in paths.seed_dirs():
        state = _read_json(seed.state)
        if state is not None:
            states[seed.seed] = state
        record = _read_json(seed.record)
        if record is not None:
            records[seed.seed] = RunRecord.from_json(record)
    return StoredRun(paths, manifest, _read_json(paths.summary), records, states)


# ---- the index ---------------------------------------------------------------------------


@contextmanager
def _index(results_dir: Path) -> Iterator[sqlite3.Connection]:
    try:
        results_dir.mkdir(parents=True, exist_ok=True)
        with closing(sqlite3.connect(results_dir / INDEX_NAME, timeout=30)) as db:
            db.executescript(_SCHEMA)
            with db:  # one transaction
                yield db
    except sqlite3.Error as exc:
        raise StoreError(f"index {results_dir / INDEX_NAME}: {exc}") from None
    except PermissionError as exc:
        raise StoreError(f"results folder {results_dir}: {exc.strerror}") from None


def _run_mtime(paths: RunPaths) -> float:
    stamps = [p.stat().st_mtime for p in (paths.manifest, paths.summary) if p.exists()]
    stamps += [s.state.stat().st_mtime for s in paths.seed_dirs() if s.state.exists()]
    return max(stamps, default=0.0)


def sync_run(results_dir: Path, run_id: str) -> None:
    """Write one run's rows from its folder (the truth) into the index."""
    run = open_run(results_dir, run_id)
    _write_rows(results_dir, run, _run_mtime(run.paths))


def _write_rows(results_dir: Path, run: StoredRun, mtime: float) -> None:
    m, s = run.manifest, run.summary or {}
    with _index(results_dir) as db:
        db.execute("DELETE FROM seeds WHERE run_id = ?", (run.run_id,))
        db.execute(
            "INSERT OR REPLACE INTO runs VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                run.run_id, m.get("workload"), m.get("benchmark"), m.get("profile"), m.get("label"),
                m.get("runner"), m.get("host"), m.get("started_at"), m.get("ended_at"), m.get("state"),
                len(m.get("seeds", [])), s.get("converged"),
                None if not s else int(bool(s.get("valid"))), s.get("score_ms"), s.get("reason"), mtime,
            ),
        )
        for seed in m.get("seeds", []):
            record = run.records.get(seed)
            db.execute(
                "INSERT INTO seeds VALUES (?,?,?,?,?,?,?)",
                (
                    run.run_id, seed, run.states.get(seed, {}).get("state", SEED_PENDING),
                    record.status.value if record else None,
                    record.time_to_train_ms if record else None,
                    record.epochs_to_target if record else None,
                    record.reason if record else None,
                ),
            )


def refresh_index(results_dir: Path) -> None:
    """Bring the index up to date with the folders: re-read only runs that changed, drop rows
    of runs whose folder is gone."""
    if not results_dir.is_dir():
        return
    with _index(results_dir) as db:
        known = dict(db.execute("SELECT run_id, synced_mtime FROM runs").fetchall())
    present = {p.parent.name: RunPaths(p.parent) for p in results_dir.glob("*/manifest.json")}
    for run_id, paths in present.items():
        mtime = _run_mtime(paths)
        if known.get(run_id) != mtime:
            _write_rows(results_dir, open_run(results_dir, run_id), mtime)
    gone = set(known) - set(present)
    if gone:
        with _index(results_dir) as db:
            for run_id in gone:
                db.execute("DELETE FROM runs WHERE run_id = ?", (run_id,))
                db.execute("DELETE FROM seeds WHERE run_id = ?", (run_id,))


def list_runs(results_dir: Path, label: str | None = None, workload: str | None = None) -> list[dict[str, Any]]:
    """Runs, newest first, from the (refreshed) index."""
    if not results_dir.is_dir():
        return []
    refresh_index(results_dir)
    query = "SELECT * FROM runs WHERE (? IS NULL OR label = ?) AND (? IS NULL OR workload = ?) ORDER BY started_at DESC"
    with _index(results_dir) as db:
        db.row_factory = sqlite3.Row
        rows = db.execute(query, (label, label, workload, workload)).fetchall()
    return [{k: v for k, v in dict(row).items() if k != "synced_mtime"} for row in rows]


def seed_rows(results_dir: Path, run_id: str) -> list[dict[str, Any]]:
    with _index(results_dir) as db:
        db.row_factory = sqlite3.Row
        rows = db.execute("SELECT * FROM seeds WHERE run_id = ? ORDER BY seed", (run_id,)).fetchall()
    return [dict(row) for row in rows]
