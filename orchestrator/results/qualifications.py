"""The qualifications of a results folder (`QualificationPaths`: ``<results>/qualify/``): one record
per node qualification, one per fleet, the fleet's orders to its nodes, written through
`orchestrator.results.atomic` (a failed write is exit 3: INCONCLUSIVE, never FAIL nor PASS) and
validated when read, as every stored file is.

A qualification (and a fleet) holds ``qualify.lock`` in its folder while it runs and removes it when
it ends: a lock file that no live process holds is one a killed mltrain left (`abandoned`), whose jobs
the next qualification stops.

The files are the truth (there is no index to rebuild); a damaged record, or a stray entry where a
node's folder belongs, is named and skipped by the readers that list many (`History.broken`), and is
an error where one is asked for.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TypeVar

from orchestrator.errors import RecordError, StoreError, UsageError
from orchestrator.results import atomic
from orchestrator.results.lock import RunLock, is_held
from orchestrator.results.paths import QUALIFY_LOCK, QualificationPaths, check_node_name
from orchestrator.results.qualification import FleetRecord, NodeOrder, QualificationRecord
from orchestrator.results.record_reader import read_record

R = TypeVar("R", QualificationRecord, NodeOrder)


def new_qualification_id(prefix: str, suite: str) -> str:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    return f"{prefix}-{suite}-{stamp}-{secrets.token_hex(2)}"


@dataclass(frozen=True)
class History:
    records: list[QualificationRecord]
    """Oldest first."""
    broken: list[str]
    """One line per file (or stray entry) that could not be read."""


class Qualifications:
    """The qualification part of one results folder (`Store.qualifications`)."""

    def __init__(self, results_dir: Path) -> None:
        self.paths = QualificationPaths(results_dir / "qualify")
        self.root = self.paths.root

    def node_dir(self, node: str) -> Path:
        return self.paths.node(node)

    def record_path(self, record: QualificationRecord) -> Path:
        return self.paths.record(record.node, record.qualification_id)

    def fleet_dir(self, fleet_id: str) -> Path:
        return self.paths.fleet(fleet_id)

    def new_folder(self, node: str, qualification_id: str) -> Path:
        """Make a qualification's folder, once the node's folder holds nothing mltrain could not have
        left there (`check_locks`): a layout fault is found before anything is written."""
        self.check_locks(self.node_dir(node))
        return atomic.make_folder(self.paths.folder(node, qualification_id))

    def save(self, record: QualificationRecord) -> Path:
        path = self.record_path(record)
        atomic.write_json(path, record.to_json())
        return path

    def save_order(self, order: NodeOrder) -> Path:
        path = self.paths.order(order.fleet_id, order.node)
        atomic.write_json(path, order.to_json())
        return path

    def save_fleet(self, record: FleetRecord) -> Path:
        path = self.paths.fleet_record(record.fleet_id)
        atomic.write_json(path, record.to_json())
        return path

    def begin(self, folder: Path, run_id: str) -> RunLock:
        """Make ``folder`` and hold its lock while qualification (or fleet) ``run_id`` runs."""
        self.check_locks(folder.parent)
        atomic.make_folder(folder)
        try:
            return RunLock(QualificationPaths.lock(folder), run_id)
        except BaseException:  # a qualification that never began leaves no folder (a full disk)
            lock = QualificationPaths.lock(folder)
            if atomic.is_empty_file(lock):
                lock.unlink()
            _remove_empty(folder)
            raise

    @staticmethod
    def end(lock: RunLock) -> None:
        """Release and remove the lock: the qualification ended in order."""
        lock.release()
        lock.path.unlink(missing_ok=True)

    @staticmethod
    def check_locks(parent: Path) -> None:
        """Every ``qualify.lock`` under ``parent`` is a regular file (`atomic.NotAFile`, exit 2, naming
        the first that is not: a folder or a link there is not mltrain's, and is left as it is)."""
        for lock in sorted(parent.glob(f"*/{QUALIFY_LOCK}")):
            atomic.check_regular(lock)

    def abandoned(self, parent: Path) -> list[str]:
        """The ids of the qualifications (fleets) under ``parent`` that a killed mltrain left: a lock
        file there that no live process holds. `forget` one once its jobs are stopped."""
        locks = sorted(parent.glob(f"*/{QUALIFY_LOCK}"))
        for lock in locks:  # as `check_locks`, on the one listing
            atomic.check_regular(lock)
        return [lock.parent.name for lock in locks if not is_held(lock)]

    @staticmethod
    def forget(parent: Path, run_id: str) -> None:
        QualificationPaths.lock(parent / run_id).unlink(missing_ok=True)

    def nodes(self) -> list[str]:
        """The nodes with a folder here (stray entries left out: `History.broken` names them)."""
        return [name for name, problem in self._node_entries() if not problem]

    def _node_entries(self) -> list[tuple[str, str]]:
        """(name, '' or why it is not a node's folder) for each entry of ``qualify/nodes``; StoreError
        (exit 2) when ``qualify`` or ``qualify/nodes`` is not a folder."""
        for folder in (self.root, self.paths.nodes):
            if os.path.lexists(folder) and not folder.is_dir():
                raise StoreError(f"{folder} is {atomic.what_is(os.lstat(folder).st_mode)} where a folder of"
                                 " qualifications belongs; move it away")
        if not self.paths.nodes.is_dir():
            return []
        entries: list[tuple[str, str]] = []
        try:
            listed = sorted(self.paths.nodes.iterdir())
        except OSError as exc:
            raise StoreError(f"{self.paths.nodes}: cannot be read ({exc.strerror or exc})") from None
        for entry in listed:
            try:
                check_node_name(entry.name)
            except UsageError:
                entries.append((entry.name, f"{entry}: not a node's folder (a node name is letters, digits, '.', '_'"
                                             " and '-'); skipped"))
                continue
            problem = "" if entry.is_dir() else f"{entry}: {atomic.what_is(os.lstat(entry).st_mode)}, not a node's" \
                                                 " folder; skipped"
            entries.append((entry.name, problem))
        return entries

    def history(self, node: str | None = None) -> History:
        """Every record (of one node), oldest first; unreadable files and stray entries are listed,
        not raised. A record is its node's only where it lives in that node's folder."""
        records: list[QualificationRecord] = []
        entries = [(check_node_name(node), "")] if node else self._node_entries()
        broken = [problem for _, problem in entries if problem]
        for name in (name for name, problem in entries if not problem):
            try:
                paths = json_files(self.node_dir(name))
            except OSError as exc:  # a folder this user may not read: named, the other nodes listed
                broken.append(f"{exc.filename}: cannot be read ({exc.strerror or exc}); its qualifications are"
                              " not shown")
                continue
            for path in paths:
                try:
                    record = _in_place(read_record(path, QualificationRecord), path, name)
                except RecordError as exc:
                    broken.append(str(exc))
                    continue
                if record is not None:
                    records.append(record)
        records.sort(key=lambda r: (r.started_at, r.qualification_id))
        return History(records, broken)

    @staticmethod
    def load(path: Path) -> QualificationRecord:
        """One record from a file (a fleet job's output); RecordError when it is damaged or missing."""
        return _required(path, QualificationRecord, "no qualification record was written")

    def fleets(self) -> list[FleetRecord]:
        try:
            paths = json_files(self.paths.fleets)
        except OSError as exc:
            raise StoreError(f"{exc.filename}: cannot be read ({exc.strerror or exc})") from None
        found = [read_record(p, FleetRecord) for p in paths]
        return [f for f in found if f is not None]


def json_files(folder: Path) -> list[Path]:
    """The ``*.json`` files of ``folder``, sorted; none where there is no folder. OSError where it
    cannot be listed (`Path.glob` passes over a folder it may not read, as if it were empty)."""
    try:
        with os.scandir(folder) as entries:
            return sorted(Path(entry.path) for entry in entries if entry.name.endswith(".json"))
    except (FileNotFoundError, NotADirectoryError):
        return []


def load_order(path: Path) -> NodeOrder:
    """A fleet's order to one node; RecordError when it is damaged or missing."""
    return _required(path, NodeOrder, "no node order there")


def _in_place(record: QualificationRecord | None, path: Path, node: str) -> QualificationRecord | None:
    """``record`` where it lives: its node is its folder's (RecordError naming the field otherwise:
    shown under another node, it would judge that node's history)."""
    if record is None:
        return None
    if record.node != node:
        raise RecordError(f"{path}: field node: {record.node!r} is not its folder's node {node!r}; move the file"
                          " to its node's folder or remove it")
    return record


def _remove_empty(folder: Path) -> None:
    """Remove ``folder`` and the folders in it, as far as they hold no file (nothing is deleted)."""
    for inner, _, _ in sorted(os.walk(folder), key=lambda walked: -len(walked[0])):
        with contextlib.suppress(OSError):
            os.rmdir(inner)


def _required(path: Path, model: type[R], missing: str) -> R:
    """The record ``path`` holds; RecordError saying ``missing`` when there is none, naming the field
    when it is damaged."""
    record = read_record(path, model)
    if record is None:
        raise RecordError(f"{path}: {missing}")
    return record
