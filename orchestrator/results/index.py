"""The SQLite index of a results folder: one row per run and per seed, for fast listing and comparing.

A cache, never the truth: every row is rebuilt from the run folders (`orchestrator.results.store`)
whenever they are newer than what the index holds, and the file can be deleted at any time. Whether
they may be newer is told without a look at each run where the results folder's own time says no
run folder came, went or was written by mltrain since the last full check (`Index.unchanged`, the
rule in docs/architecture.md). The
first read of a writable results folder saves the index it rebuilt, so that the next read only
looks at what changed; a read-only folder is indexed in memory (`Index.in_memory`).

The file is mltrain's own: a damaged one (not a database, a malformed page) is replaced by a new
one and rebuilt; one that another process holds locked is `IndexBusy`, which a run writing its
seeds outlives (the folders are written; the index catches up at the next read) and a listing
answers by indexing the folders in memory.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

from orchestrator.errors import StoreError, StoreWriteError
from orchestrator.results import atomic
from orchestrator.results.index_rows import RUN_COLUMNS, SCHEMA_VERSION, SEED_COLUMNS, IndexRows, SeedRow
from orchestrator.results.inference import InferenceRun
from orchestrator.results.paths import INDEX_NAME

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY, workload TEXT, benchmark TEXT, profile TEXT, label TEXT, runner TEXT,
    host TEXT, started_at TEXT, ended_at TEXT, state TEXT, seeds INTEGER, converged INTEGER,
    valid INTEGER, score_ms REAL, scaled_score_ms REAL, reason TEXT, kind TEXT, scenario TEXT,
    metric REAL, metric_unit TEXT, drop_per_end INTEGER, max_non_converged INTEGER, scaling_factor REAL,
    synced_mtime REAL
);
CREATE TABLE IF NOT EXISTS seeds (
    run_id TEXT, seed INTEGER, state TEXT, status TEXT, time_to_train_ms INTEGER,
    epochs_to_target REAL, reason TEXT, samples_per_epoch INTEGER, global_batch_size INTEGER, telemetry INTEGER,
    host TEXT, host_reason TEXT, energy_j REAL, judged INTEGER,
    PRIMARY KEY (run_id, seed)
);
CREATE INDEX IF NOT EXISTS runs_label ON runs (label);
CREATE TABLE IF NOT EXISTS checked (folder_mtime_ns INTEGER, at_ns INTEGER);
"""
FILE_VERSION = SCHEMA_VERSION * 1000 + 1
"""The index file's ``user_version``: its rows' schema, and the version of its freshness record (the
`checked` table, `Index.unchanged`). A file of another version (an older mltrain's, or one an older
mltrain rebuilt after this one) is dropped and rebuilt from the folders."""
SETTLE_NS = 2_000_000_000
"""How long before a full check the results folder's time must be, for that check to stand for it
(`Index.unchanged`): a folder changed within the same tick of its clock (coarse in the kernel, one
or two seconds on some network and FAT file systems) would keep the time the check saw."""
_LISTED = ("benchmark, converged, drop_per_end, ended_at, host, kind, label, max_non_converged, metric,"
           " metric_unit, profile, reason, run_id, runner, scaled_score_ms, scaling_factor, scenario, score_ms,"
           " seeds, started_at, state, valid, workload")
"""The runs table's columns as a listing shows them (all but `synced_mtime`), by name: a listing's rows
come with their keys in the order `--json` writes them (the encoder's sort of sorted keys is one pass)."""
_CHOSEN = "(? IS NULL OR label = ?) AND (? IS NULL OR workload = ?)"
"""The runs a listing chooses: of a label, of a workload, where it names them."""
_ROWS_A_STATEMENT = 128
"""Rows inserted by one statement (`_insert`), at most: a statement a row costs more than its row."""
READ_WAIT_S = 5.0
"""How long a reader or a run's write waits for another process's write lock before giving up."""


class IndexBusy(StoreError):
    """Another process holds the index's write lock longer than a read or a seed's write waits."""


class IndexUnsaved(StoreWriteError):
    """The index could not be written (a full disk, a quota, a read-only file): a cache, so a read
    goes on from the folders (`Store.list`) and a run's write from its files (`StoredRun.sync`)."""


CANNOT_WRITE = ("disk is full", "disk I/O error", "readonly database", "unable to open database file")
"""What SQLite says when the medium refuses a write (SQLITE_FULL, SQLITE_IOERR, SQLITE_READONLY, SQLITE_CANTOPEN)."""


class Index:
    """The index file of one results folder: one connection and transaction per operation, or one
    for a whole batch of writes (`batch`)."""

    def __init__(self, results_dir: Path, *, wait_s: float | None = None) -> None:
        self.results_dir = results_dir
        self.path = results_dir / INDEX_NAME
        self.wait_s = READ_WAIT_S if wait_s is None else wait_s
        self._memory: sqlite3.Connection | None = None
        self._held: sqlite3.Connection | None = None

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
    def batch(self) -> Iterator[None]:
        """Every operation inside shares one connection and one transaction (a refresh of thousands
        of runs is one commit, not thousands)."""
        if self._memory is not None or self._held is not None:
            yield
            return
        with self._connection() as db:
            self._held = db
            try:
                yield
            finally:
                self._held = None

    @contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        if self._memory is not None:
            with self._memory:
                yield self._memory
        elif self._held is not None:
            yield self._held
        else:
            with self._connection() as db:
                yield db

    @contextmanager
    def _connection(self) -> Iterator[sqlite3.Connection]:
        atomic.make_folder(self.results_dir)
        for suffix in ("", "-journal", "-wal", "-shm"):  # SQLite would open a link's target
            atomic.check_regular(Path(f"{self.path}{suffix}"))
        try:
            with closing(self._open()) as db, db:  # one transaction
                yield db
        except sqlite3.OperationalError as exc:
            if "locked" in str(exc) or "busy" in str(exc):
                raise IndexBusy(f"index {self.path} is held by another process (it waited {self.wait_s:g} s)") \
                    from None
            if any(words in str(exc) for words in CANNOT_WRITE):
                raise IndexUnsaved(f"cannot write {self.path}: {exc}") from None
            raise StoreError(f"index {self.path}: {exc}") from None
        except sqlite3.Error as exc:
            raise StoreError(f"index {self.path}: {exc}") from None
        except OSError as exc:
            raise atomic.write_error(exc, self.path) from None

    def _open(self) -> sqlite3.Connection:
        """A connection to a usable index: a damaged or older file is replaced (it is a cache)."""
        for attempt in (1, 2):
            db = sqlite3.connect(self.path, timeout=self.wait_s)
            try:
                db.execute("PRAGMA journal_mode = TRUNCATE")  # kept: the folder's time moves with runs only
                version = db.execute("PRAGMA user_version").fetchone()[0]
                if version != FILE_VERSION:
                    db.executescript("DROP TABLE IF EXISTS runs; DROP TABLE IF EXISTS seeds; DROP TABLE IF EXISTS"
                                     f" checked; {_SCHEMA} PRAGMA user_version = {FILE_VERSION};")
                db.row_factory = sqlite3.Row
                return db
            except sqlite3.DatabaseError as exc:
                db.close()
                if isinstance(exc, sqlite3.OperationalError) or attempt == 2:
                    raise
                self._discard()  # not a database, or a malformed one: start again
        raise AssertionError("unreachable")

    def _discard(self) -> None:
        for suffix in ("", "-journal", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                Path(f"{self.path}{suffix}").unlink()

    def write_or_defer(self, write: Callable[[Index], None]) -> str:
        """``write`` this index for a run whose files are written: a cache that another process holds,
        or that cannot be written (a full disk), does not fail the run; the next read catches the index
        up from the folders. The results folder's time is set to now first (`touch`): a read checks
        every run's files until the index has the write (`unchanged`), whether it is deferred here
        or this process dies before it lands. Returns why it was deferred, or ''."""
        self.touch()
        try:
            write(self)
        except (IndexBusy, IndexUnsaved) as exc:
            return f"{exc}: the index catches up at the next listing"
        return ""

    def touch(self) -> None:
        """Set the results folder's time to now: the next read checks every run (`unchanged`)."""
        with contextlib.suppress(OSError):  # a folder gone, or not this user's: its reads check every run
            os.utime(self.results_dir)

    def unchanged(self, folder_mtime_ns: int) -> bool:
        """No run folder was added, removed or written by mltrain (`write_or_defer`) since the last
        full check found every run readable and saved its rows: the results folder's time is the one
        that check saw, and was older than it by `SETTLE_NS` (a later change moves it)."""
        if self._memory is not None or not self.path.exists():
            return False
        with self._db() as db:
            return _stands(_tuples(db, "SELECT folder_mtime_ns, at_ns FROM checked"), folder_mtime_ns)

    def checked(self, folder_mtime_ns: int | None, at_ns: int) -> None:
        """A full check that began at ``at_ns``, when the results folder's time was ``folder_mtime_ns``,
        is saved (None: it found a run it could not read, which the next read checks again). Written
        only where it changes what `unchanged` answers: a check within `SETTLE_NS` of the folder's time
        stands for nothing, and one already standing needs no saving, so that a read of a settled
        folder, or of one just written, leaves the index file as it was."""
        with self._db() as db:
            found = _tuples(db, "SELECT folder_mtime_ns, at_ns FROM checked")
            if folder_mtime_ns is None:
                if found:
                    db.execute("DELETE FROM checked")
            elif _stands([(folder_mtime_ns, at_ns)], folder_mtime_ns) and not _stands(found, folder_mtime_ns):
                db.execute("DELETE FROM checked")
                db.execute("INSERT INTO checked VALUES (?, ?)", (folder_mtime_ns, at_ns))

    def running(self) -> dict[str, tuple[str, float]]:
        """The runs the index holds as running: run id -> (kind, the time its rows were written from)."""
        with self._db() as db:
            return {run_id: (kind, mtime) for run_id, kind, mtime in
                    _tuples(db, "SELECT run_id, kind, synced_mtime FROM runs WHERE state = 'running'")}

    def synced(self) -> dict[str, float]:
        """run id -> the folder time its rows were written from."""
        if not self.exists:
            return {}
        with self._db() as db:
            return dict(_tuples(db, "SELECT run_id, synced_mtime FROM runs"))

    def put(self, *rows: IndexRows) -> None:
        """Replace training runs' rows (`results.index_rows.build`), all in one statement a table (the
        runs' old seed rows deleted first, where the index holds any: a rebuild of an empty one does not)."""
        with self._db() as db:
            if db.execute("SELECT 1 FROM seeds LIMIT 1").fetchone() is not None:
                db.executemany("DELETE FROM seeds WHERE run_id = ?", [(run.run.run_id,) for run in rows])
            _insert(db, "INSERT OR REPLACE INTO runs", RUN_COLUMNS, [run.run for run in rows])
            _insert(db, "INSERT INTO seeds", SEED_COLUMNS, [seed for run in rows for seed in run.seeds])

    def write_inference(self, run: InferenceRun, mtime: float) -> None:
        """Replace one inference run's row: the model as its workload, the scenario's metric as its score."""
        result = run.result
        perf = result.performance if result else None
        reason = "; ".join(result.reasons) if result else run.failure
        with self._db() as db:
            db.execute("DELETE FROM seeds WHERE run_id = ?", (run.run_id,))
            db.execute(
                f"INSERT OR REPLACE INTO runs VALUES ({','.join('?' * RUN_COLUMNS)})",
                (
                    run.run_id, run.model, run.model, run.profile, run.label, run.runner, run.host, run.started_at,
                    run.ended_at, run.state, None, None, None if result is None else int(run.passed), None, None,
                    reason, "inference", run.scenario, perf.value if perf else None, perf.unit if perf else None,
                    None, None, None, mtime,
                ),
            )

    def forget(self, run_ids: set[str]) -> None:
        if not run_ids or not self.exists:
            return
        with self._db() as db:
            db.executemany("DELETE FROM runs WHERE run_id = ?", [(r,) for r in run_ids])
            db.executemany("DELETE FROM seeds WHERE run_id = ?", [(r,) for r in run_ids])

    def seed_numbers(self) -> dict[str, list[int]]:
        """Each indexed run's seeds."""
        if not self.exists:
            return {}
        found: dict[str, list[int]] = {}
        with self._db() as db:
            for run_id, seed in _tuples(db, "SELECT run_id, seed FROM seeds"):
                found.setdefault(run_id, []).append(seed)
        return found

    def runs(self, *, label: str | None = None, workload: str | None = None,
             newest: int | None = None) -> list[dict[str, Any]]:
        """Run rows, newest first (``newest``: only that many)."""
        query = (f"SELECT {_LISTED} FROM runs WHERE {_CHOSEN} ORDER BY started_at DESC, run_id DESC LIMIT ?")
        with self._db() as db:
            return _dicts(db, query, (label, label, workload, workload, -1 if newest is None else newest))

    def count(self, *, label: str | None = None, workload: str | None = None) -> int:
        """How many runs `runs` would return, all of them."""
        with self._db() as db:
            return int(db.execute(f"SELECT COUNT(*) FROM runs WHERE {_CHOSEN}", (label, label, workload, workload))
                       .fetchone()[0])

    def seeds(self, run_id: str) -> list[dict[str, Any]]:
        with self._db() as db:
            rows = db.execute("SELECT * FROM seeds WHERE run_id = ? ORDER BY seed", (run_id,)).fetchall()
        return [dict(row) for row in rows]

    def seeds_of(self, run_ids: list[str]) -> dict[str, list[SeedRow]]:
        """The seed rows of many runs at once, by run id (in seed order), as typed tuples (a dict
        each cost more than the rest of a comparison of 10,000 runs): for most of the index's runs,
        its table in one pass (a join through a table of the wanted ids costs more than the rows
        it leaves out)."""
        found: dict[str, list[SeedRow]] = {run_id: [] for run_id in run_ids}
        with self._db() as db:
            held = db.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
            if 2 * len(found) >= held:
                rows = _tuples(db, "SELECT * FROM seeds ORDER BY run_id, seed")
            else:
                db.execute("CREATE TEMP TABLE IF NOT EXISTS wanted (run_id TEXT PRIMARY KEY)")
                db.execute("DELETE FROM wanted")
                db.executemany("INSERT OR IGNORE INTO wanted VALUES (?)", [(r,) for r in found])
                rows = _tuples(db, "SELECT seeds.* FROM seeds JOIN wanted USING (run_id) ORDER BY run_id, seed")
        make = SeedRow._make
        for row in rows:
            seeds = found.get(row[0])
            if seeds is not None:
                seeds.append(make(row))
        return found


def _stands(checks: list[tuple[Any, ...]], folder_mtime_ns: int) -> bool:
    """One full check saved, of the folder's present time, made at least `SETTLE_NS` after it."""
    return len(checks) == 1 and checks[0][0] == folder_mtime_ns and folder_mtime_ns < checks[0][1] - SETTLE_NS


def _insert(db: sqlite3.Connection, insert: str, columns: int, rows: list[tuple[Any, ...]]) -> None:
    """``rows`` of ``columns`` values each, inserted (``insert``: the statement's head) many rows a
    statement, as many as SQLite binds values in one (at 100,000 runs, 400,000 rows: a statement each
    cost 0.5 s more)."""
    limit = db.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) if hasattr(db, "getlimit") else 999  # (Python 3.11)
    per = max(1, min(_ROWS_A_STATEMENT, limit // columns))
    row = f"({','.join('?' * columns)})"
    whole = len(rows) - len(rows) % per
    values = itertools.chain.from_iterable
    if whole:
        db.executemany(f"{insert} VALUES {','.join([row] * per)}",
                       [tuple(values(rows[at:at + per])) for at in range(0, whole, per)])
    if whole < len(rows):
        db.execute(f"{insert} VALUES {','.join([row] * (len(rows) - whole))}", tuple(values(rows[whole:])))


def _tuples(db: sqlite3.Connection, query: str, parameters: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """A query's rows as plain tuples (a `sqlite3.Row` each costs more than the row: thousands of runs)."""
    cursor = db.cursor()
    cursor.row_factory = None
    return cursor.execute(query, parameters).fetchall()


def _dicts(db: sqlite3.Connection, query: str, parameters: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
    """A query's rows as dicts by column name, built from plain tuples (`_tuples`)."""
    cursor = db.cursor()
    cursor.row_factory = None
    rows = cursor.execute(query, parameters).fetchall()
    names = [column[0] for column in cursor.description or ()]
    return [dict(zip(names, row, strict=True)) for row in rows]
