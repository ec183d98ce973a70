"""The results store: one folder per benchmark run (the truth) and an SQLite index of runs and
seeds (a cache, `orchestrator.results.index`, rebuilt from the folders whenever they are newer).

A run is opened once (`Store.open`, `Store.create`) and written through its `StoredRun` handle,
which keeps the files and the index in step. Every file is validated as it is read: a damaged or
foreign file is a `RecordError` naming the file and the field.
"""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ValidationError

from orchestrator.errors import RecordError, StoreError, UsageError
from orchestrator.results import atomic
from orchestrator.results.index import Index
from orchestrator.results.paths import RunPaths
from orchestrator.results.records import Manifest, Record, RunRecord, SeedState, SeedStateName, Summary

R = TypeVar("R", bound=Record)


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def new_run_id(workload: str, profile: str) -> str:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    return f"{workload}-{profile}-{stamp}-{secrets.token_hex(2)}"


def check_results_dir(results_dir: Path) -> None:
    """The results folder must be a writable folder (it is made when missing)."""
    if results_dir.exists() and not results_dir.is_dir():
        raise StoreError(f"results folder {results_dir} is not a folder")
    probe = results_dir if results_dir.exists() else results_dir.parent
    if probe.exists() and not os.access(probe, os.R_OK | os.W_OK | os.X_OK):
        raise StoreError(f"results folder {probe} is not readable and writable by this user")


def read_record(path: Path, model: type[R]) -> R | None:
    """A stored JSON file as its typed record; None when it does not exist."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise RecordError(f"{path}: unreadable ({' '.join(str(exc).split())}); repair or remove the run folder") \
            from None
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise RecordError(f"{path}: {_first_problem(exc)}; repair or remove the run folder") from None


def _first_problem(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "(top level)"
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"field {where}: {' '.join(first['msg'].split())}{more}"


@dataclass(frozen=True)
class BrokenRun:
    """A run folder that cannot be read, and why."""

    run_id: str
    problem: str


@dataclass(frozen=True)
class Listing:
    rows: list[dict[str, Any]]
    """One row per readable run, newest first."""
    broken: list[BrokenRun]
    """Run folders that could not be read."""


class Store:
    """One results folder."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.index = Index(root)

    def paths(self, run_id: str) -> RunPaths:
        if not run_id or "/" in run_id or run_id.startswith(".") or "\0" in run_id:
            raise UsageError(f"bad run id {run_id!r}")
        return RunPaths(self.root / run_id)

    def run_ids(self) -> list[str]:
        """Folders holding a manifest, whatever its state."""
        if not self.root.is_dir():
            return []
        return sorted(p.parent.name for p in self.root.glob("*/manifest.json"))

    def create(self, manifest: Manifest) -> StoredRun:
        """Make the run's folder with its manifest and a pending state per seed."""
        paths = self.paths(manifest.run_id)
        try:
            paths.root.mkdir(parents=True, exist_ok=False)
        except FileExistsError:
            raise StoreError(f"run {paths.run_id} already exists in {self.root}") from None
        except OSError as exc:
            raise StoreError(f"cannot create {paths.root}: {exc.strerror}") from None
        run = StoredRun(self, paths, manifest, None, {}, {})
        atomic.write_json(paths.manifest, manifest.to_json())
        for seed in manifest.seeds:
            state = SeedState(seed=seed, state=SeedStateName.PENDING)
            atomic.write_json(paths.seed(seed).state, state.to_json())
            run.states[seed] = state
        run.sync()
        return run

    def open(self, run_id: str) -> StoredRun:
        paths = self.paths(run_id)
        manifest = read_record(paths.manifest, Manifest)
        if manifest is None:
            known = self.run_ids()[-5:]
            hint = f" (runs here: {', '.join(known)})" if known else ""
            raise UsageError(f"no run {run_id!r} in {self.root}{hint}")
        if manifest.run_id != paths.run_id:
            raise RecordError(f"{paths.manifest}: field run_id: {manifest.run_id!r} is not its folder's name")
        records: dict[int, RunRecord] = {}
        states: dict[int, SeedState] = {}
        for seed in manifest.seeds:
            seed_paths = paths.seed(seed)
            state = read_record(seed_paths.state, SeedState)
            if state is not None:
                if state.seed != seed:
                    raise RecordError(f"{seed_paths.state}: field seed: {state.seed} is not its folder's seed {seed}")
                states[seed] = state
            record = read_record(seed_paths.record, RunRecord)
            if record is not None:
                records[seed] = record
        return StoredRun(self, paths, manifest, read_record(paths.summary, Summary), records, states)

    def refresh(self) -> list[BrokenRun]:
        """Bring the index up to date with the folders: re-read only runs that changed, drop rows
        of runs whose folder is gone or damaged. Returns the damaged ones."""
        synced = self.index.synced()
        present = self.run_ids()
        broken: list[BrokenRun] = []
        for run_id in present:
            if synced.get(run_id) == _run_mtime(RunPaths(self.root / run_id)):
                continue
            try:
                self.open(run_id).sync()
            except (RecordError, UsageError) as exc:
                broken.append(BrokenRun(run_id, str(exc)))
        self.index.forget((set(synced) - set(present)) | {b.run_id for b in broken})
        return broken

    def list(self, *, label: str | None = None, workload: str | None = None) -> Listing:
        """Runs, newest first, from the refreshed index, and the folders that could not be read."""
        if not self.root.is_dir():
            return Listing([], [])
        broken = self.refresh()
        return Listing(self.index.runs(label=label, workload=workload), broken)


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

    @property
    def run_id(self) -> str:
        return self.paths.run_id

    def unfinished_seeds(self) -> list[int]:
        return [s for s in self.manifest.seeds if not (s in self.states and self.states[s].finished)]

    def finished_records(self) -> dict[int, RunRecord]:
        """The records of the seeds that finished (what scoring counts)."""
        return {s: r for s, r in sorted(self.records.items()) if s in self.states and self.states[s].finished}

    def save_manifest(self, manifest: Manifest) -> None:
        atomic.write_json(self.paths.manifest, manifest.to_json())
        self.manifest = manifest
        self.sync()

    def save_summary(self, summary: Summary) -> None:
        atomic.write_json(self.paths.summary, summary.to_json())
        self.summary = summary
        self.sync()

    def save_seed(self, state: SeedState, record: RunRecord | None = None) -> None:
        """Write a seed's record (if any), then its state: the state is what says it finished."""
        seed = self.paths.seed(state.seed)
        if record is not None:
            atomic.write_json(seed.record, record.to_json())
            self.records[state.seed] = record
        atomic.write_json(seed.state, state.to_json())
        self.states[state.seed] = state
        self.sync()

    def sync(self) -> None:
        """Write this run's rows into the index, from what this handle holds."""
        self.store.index.write(self.manifest, self.summary, self.states, self.records, _run_mtime(self.paths))


def _run_mtime(paths: RunPaths) -> float:
    stamps = [p.stat().st_mtime for p in (paths.manifest, paths.summary) if p.exists()]
    stamps += [f.stat().st_mtime for s in paths.seed_dirs() for f in (s.state, s.record) if f.exists()]
    return max(stamps, default=0.0)

