"""A training run's handle (`StoredRun`): the run as it stands on disk, and the one way to write it
(its manifest, summary, seeds and decisions, each written whole by `orchestrator.results.atomic`, then
its index rows). `Store.create` and `Store.open` make one."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from orchestrator.results import atomic, index_rows
from orchestrator.results.decisions import DecisionLog
from orchestrator.results.index import Index
from orchestrator.results.lock import RunLock
from orchestrator.results.paths import RunPaths
from orchestrator.results.records import Manifest, RunRecord, SeedState, SeedStateName, Summary
from orchestrator.results.refresh import run_mtime

if TYPE_CHECKING:
    from orchestrator.results.store import Store


@dataclass
class StoredRun:
    """A benchmark run as it stands on disk, and the one way to write it."""

    store: Store
    paths: RunPaths
    manifest: Manifest
    summary: Summary | None
    records: dict[int, RunRecord] = field(default_factory=dict)
    """seed -> record, for seeds whose record exists."""
    states: dict[int, SeedState] = field(default_factory=dict)
    lock: RunLock | None = None
    """Held while this process may write the run."""
    decisions: DecisionLog | None = None
    """A sequential rule's record (`decisions.json`), for runs that decide their own seed count."""
    index_note: str = ""
    """Set when a write of this run could not update the index (held by another process, or unwritable)."""

    @property
    def run_id(self) -> str:
        return self.paths.run_id

    @property
    def state(self) -> str:
        """The run's state as every command shows it (`Store.state`)."""
        return self.store.state(self.run_id, self.manifest.state)

    def locked(self) -> StoredRun:
        """This run, read again under its lock (RunBusy, naming the holder, when a live process
        holds it). Validate before locking: taking the lock writes the lock file."""
        lock = RunLock(self.paths.lock, self.run_id)
        try:
            run = self.store.open(self.run_id)
        except BaseException:
            lock.release()
            raise
        run.lock = lock
        return run

    def close(self) -> None:
        """Release the lock (idempotent)."""
        if self.lock is not None:
            self.lock.release()

    def finished(self, seed: int) -> bool:
        """Finished means a finished state and the record it finished with."""
        state = self.states.get(seed)
        return state is not None and state.finished and seed in self.records

    def unfinished_seeds(self) -> list[int]:
        return [s for s in self.manifest.seeds if not self.finished(s)]

    def finished_records(self) -> dict[int, RunRecord]:
        """The records of the seeds that finished (what scoring counts)."""
        return {s: r for s, r in sorted(self.records.items()) if self.finished(s)}

    def save_manifest(self, manifest: Manifest) -> None:
        atomic.write_json(self.paths.manifest, manifest.to_json())
        self.manifest = manifest
        self.sync()

    def save_summary(self, summary: Summary) -> None:
        atomic.write_json(self.paths.summary, summary.to_json())
        self.summary = summary
        self.sync()

    def save_decisions(self, decisions: DecisionLog) -> None:
        atomic.write_json(self.paths.decisions, decisions.to_json())
        self.decisions = decisions

    def add_seed(self, seed: int) -> None:
        """One more seed for a run whose rule asks for it: its pending state, then the manifest
        listing it (a state without the manifest's mention is ignored, and overwritten here)."""
        state = SeedState(seed=seed, state=SeedStateName.PENDING)
        atomic.write_json(self.paths.seed(seed).state, state.to_json())
        self.states[seed] = state
        self.save_manifest(self.manifest.model_copy(update={"seeds": (*self.manifest.seeds, seed)}))

    def save_seed(self, state: SeedState, record: RunRecord | None = None) -> None:
        """Write a seed's record (if any), then its state: the state is what says it finished."""
        seed = self.paths.seed(state.seed)
        if record is not None:
            atomic.write_json(seed.record, record.to_json())
            self.records[state.seed] = record
        atomic.write_json(seed.state, state.to_json())
        self.states[state.seed] = state
        self.sync()

    def forget_record(self, seed: int) -> None:
        """The seed's record was archived with its attempt."""
        self.records.pop(seed, None)

    def sync(self, index: Index | None = None, *, mtime: float | None = None) -> None:
        """Write this run's rows into ``index`` (a refresh's, whose errors are its caller's), or into
        the store's index and the run's own `rows.json` (`results.index_rows`), neither of which can
        fail the run: the folders are written, and an index another process holds, or one a full disk
        cannot take, catches up at the next read (`Store.refresh`).
        ``mtime``: the run's time as the refresh found it before reading the run (`run_mtime`)."""
        telemetry = frozenset(seed for seed in self.manifest.seeds if self.paths.seed(seed).telemetry.is_file())
        stamp = run_mtime(self.paths.root) if mtime is None else mtime
        rows = index_rows.build(self.manifest, self.summary, self.states, self.records, stamp, telemetry=telemetry)
        if index is not None:
            index.put(rows)
            return
        self.index_note = index_rows.save(self.paths.root, rows) or self.index_note
        self.index_note = self.store.index.write_or_defer(lambda target: target.put(rows)) or self.index_note
