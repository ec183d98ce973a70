"""A results folder's index brought up to date with its run folders (`refresh`), and what a listing
returns (`Listing`): each run folder's time taken from a few system calls (`run_mtime`), and only the
runs that changed since their rows were written are read again (a run the index does not hold, from
the rows its last write kept, `results.index_rows`, where they are up to date); a run folder that
cannot be read is a `BrokenRun`, named, and the others are listed."""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from stat import S_ISDIR
from typing import TYPE_CHECKING, Any

from orchestrator.errors import RecordError, UsageError
from orchestrator.results import index_rows
from orchestrator.results.index import Index
from orchestrator.results.inference_run import sync as sync_inference
from orchestrator.results.paths import INFERENCE_FILE, MANIFEST_NAME, RECORD_NAME, STATE_NAME, SUMMARY_NAME

if TYPE_CHECKING:
    from orchestrator.results.store import Store


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
    index: Index | None = None
    """The refreshed index the rows came from (its seed rows answer comparisons without opening runs)."""
    note: str = ""
    """Why the rows came from an index built in memory where a saved one would have served."""
    total: int = 0
    """How many runs the listing chose (``rows`` holds the newest of them, where it was asked for fewer)."""


def refresh(store: Store, index: Index) -> list[BrokenRun]:
    """Bring the index (this folder's, or ``index``) up to date with the folders: re-read only
    runs that changed, drop rows of runs whose folder is gone or damaged, all in one transaction.
    Returns the damaged ones. Training runs and inference runs alike.

    Where no run folder was added, removed or written by mltrain since the last full check
    (`Index.unchanged`: the results folder's own time), only the runs the index holds as running
    are looked at (a few system calls each; one whose writer died between its files and its rows);
    every other run is as the index has it, with no system call of its own."""
    with index.batch():
        at_ns, folder_ns = time.time_ns(), os.stat(store.root).st_mtime_ns
        if index.unchanged(folder_ns) and _running_unchanged(store.root, index):
            return []
        broken = _check_all(store, index)
        index.checked(None if broken else folder_ns, at_ns)
    return broken


def _running_unchanged(root: Path, index: Index) -> bool:
    """Each run the index holds as running has the time its rows were written from."""
    running = index.running()
    seeds = index.seed_numbers() if running else {}
    for run_id, (kind, synced) in running.items():
        folder = f"{root}/{run_id}"
        try:
            if kind == "inference":
                stamp = os.stat(f"{folder}/{INFERENCE_FILE}").st_mtime
            else:
                stamp = run_mtime(folder, os.stat(f"{folder}/{MANIFEST_NAME}").st_mtime, seeds.get(run_id))
        except OSError:  # gone, or not readable now: the full check names it
            return False
        if stamp != synced:
            return False
    return True


def _check_all(store: Store, index: Index) -> list[BrokenRun]:
    """Every run folder's time (`_stamps`) against its rows'; the damaged runs."""
    synced = index.synced()
    found = _stamps(store.root, index.seed_numbers())
    training, inference = found.training, found.inference
    broken = [BrokenRun(run_id, problem) for run_id, problem in found.unreadable.items()]
    kept: list[index_rows.IndexRows] = []
    for run_id, stamp in [*training.items(), *inference.items()]:
        is_training = run_id in training
        if synced.get(run_id) == stamp:
            continue
        try:
            if is_training:
                folder = f"{store.root}/{run_id}"
                rows = _kept_rows(folder, run_id, stamp, found.rows.get(run_id), is_link=run_id in found.links)
                if rows is not None:  # the rows the run's last write kept: its records need no reading
                    kept.append(rows)
                else:
                    store.open(run_id).sync(index, mtime=stamp)
            else:
                sync_inference(store.inference_paths(run_id), store.open_inference(run_id), index)
        except (RecordError, UsageError) as exc:
            broken.append(BrokenRun(run_id, str(exc)))
        except OSError as exc:  # what a record's reader does not read itself: a folder's links, its listing
            broken.append(BrokenRun(run_id, f"{exc.filename or run_id}: {exc.strerror or exc}"))
    index.put(*kept)
    index.forget((set(synced) - set(training) - set(inference)) | {b.run_id for b in broken})
    return broken


def _kept_rows(folder: str, run_id: str, stamp: float, found: tuple[index_rows.Kept, float | None] | None, *,
               is_link: bool) -> index_rows.IndexRows | None:
    """The rows the run's last write kept, where they stand for it (`index_rows.usable`); ``found``:
    what `_stamps` read of them (a run the index does not hold), else they are read here (one the
    index holds, changed since)."""
    if found is None:
        held = index_rows.kept(folder)
        if held is None:
            return None
        found = held, seed_folders_time(folder, index_rows.seeds_of(held))
    return index_rows.usable(folder, run_id, stamp, *found, is_link=is_link)


@dataclass
class _Stamps:
    training: dict[str, float] = field(default_factory=dict)
    """Each training run's time (`run_mtime`)."""
    inference: dict[str, float] = field(default_factory=dict)
    unreadable: dict[str, str] = field(default_factory=dict)
    """The folders that cannot be read, each with its problem."""
    rows: dict[str, tuple[index_rows.Kept, float | None]] = field(default_factory=dict)
    """The kept rows (`index_rows.kept`) of the runs the index does not hold, read to learn their
    seeds, each with its seed folders' time (`seed_folders_time`)."""
    links: set[str] = field(default_factory=set)
    """The run folders that are links."""


def _stamps(root: Path, seeds: dict[str, list[int]]) -> _Stamps:
    """Each run folder's time (`run_mtime`), training runs and inference runs apart, and the
    folders that cannot be read (named, the others listed): one pass over the folder, a few system
    calls per run (thousands of runs are listed in a blink). ``seeds``: each indexed run's seeds; a
    run the index does not hold takes them from its kept rows (a run that gains a seed rewrites its
    manifest, so named seeds need no listing of their folder), and lists them only without rows."""
    found = _Stamps()
    with os.scandir(root) as entries:
        listed = [(e.name, e.is_symlink()) for e in entries if not e.name.startswith(".") and e.is_dir()]
    found.links = {name for name, is_link in listed if is_link}
    folder_of = str(root)
    for name in sorted(name for name, _ in listed):
        folder = f"{folder_of}/{name}"  # (not os.path.join: thousands of runs)
        try:
            try:
                manifest_mtime = os.stat(f"{folder}/{MANIFEST_NAME}").st_mtime
            except FileNotFoundError:
                with contextlib.suppress(FileNotFoundError):
                    found.inference[name] = os.stat(f"{folder}/{INFERENCE_FILE}").st_mtime
                continue
            named = seeds.get(name)
            if named is None:
                held = index_rows.kept(folder)
                if held is not None:  # the rows' own check in the same pass
                    named = index_rows.seeds_of(held)
                    found.rows[name] = held, seed_folders_time(folder, named)
            found.training[name] = run_mtime(folder, manifest_mtime, named)
        except OSError as exc:  # a folder this user may not read (EACCES), a loop of links (ELOOP)
            found.unreadable[name] = f"{exc.filename or folder}: {exc.strerror or exc}"
    return found


def run_mtime(folder: str | Path, manifest_mtime: float | None = None, seeds: list[int] | None = None) -> float:
    """The newest modification time of the files a run's index rows come from (its manifest and
    summary, each seed's state and record): one stat each; the seed folders are listed unless
    ``seeds`` names them."""
    stamps = [manifest_mtime] if manifest_mtime is not None else []
    names = [SUMMARY_NAME] if manifest_mtime is not None else [MANIFEST_NAME, SUMMARY_NAME]
    files = [f"{folder}/{name}" for name in names]  # (not os.path.join: thousands of runs, a few each)
    seeds_folder = f"{folder}/seeds"
    if seeds is not None:
        folders = [f"{seeds_folder}/{seed}" for seed in seeds]
    else:
        folders = []
        with contextlib.suppress(FileNotFoundError, NotADirectoryError), os.scandir(seeds_folder) as entries:
            folders = [entry.path for entry in entries if entry.is_dir()]
    files += [f"{seed}/{name}" for seed in folders for name in (STATE_NAME, RECORD_NAME)]
    stat = os.stat
    for path in files:  # a try per file, not a context manager: eight files a run, thousands of runs
        try:
            stamps.append(stat(path).st_mtime)
        except (FileNotFoundError, NotADirectoryError):
            continue
    return max(stamps, default=0.0)


def seed_folders_time(folder: str, seeds: list[int]) -> float | None:
    """The newest time of a run's seed folders themselves (one lstat a seed; a missing one has none),
    None where one of them is a link or no folder: a folder's time moves with each file made, removed
    or renamed in it, which its kept rows are checked against (`index_rows.usable`)."""
    newest = 0.0
    for seed in seeds:
        try:
            info = os.lstat(f"{folder}/seeds/{seed}")
        except (FileNotFoundError, NotADirectoryError):
            continue
        if not S_ISDIR(info.st_mode):
            return None
        newest = max(newest, info.st_mtime)
    return newest
