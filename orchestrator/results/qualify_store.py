"""Qualification history in the results folder: one JSON record per node qualification, written
atomically, validated when read.

    <results>/qualify/nodes/<node>/<qualification_id>.json    a `QualificationRecord`
    <results>/qualify/nodes/<node>/<qualification_id>/         its jobs' folders (probe/, throughput/)
    <results>/qualify/fleet/<fleet_id>.json                    a `FleetRecord`
    <results>/qualify/fleet/<fleet_id>/<node>/order.json       a `NodeOrder`, beside that node job's files

A qualification (and a fleet) holds ``qualify.lock`` in its folder while it runs and removes it when
it ends: a lock file that no live process holds is one a killed mltrain left (`abandoned`), whose jobs
the next qualification stops.

The files are the truth (there is no index to rebuild); a damaged one is reported by name and
skipped by the readers that list many (`History.broken`), and is an error where one is asked for.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TypeVar

from orchestrator.errors import RecordError, UsageError
from orchestrator.results import atomic
from orchestrator.results.lock import RunLock, is_held
from orchestrator.results.qualification import FleetRecord, NodeOrder, QualificationRecord
from orchestrator.results.store import read_record

R = TypeVar("R", QualificationRecord, NodeOrder)
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
LOCK = "qualify.lock"
ORDER = "order.json"


def new_qualification_id(prefix: str, suite: str) -> str:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    return f"{prefix}-{suite}-{stamp}-{secrets.token_hex(2)}"


def check_node_name(node: str) -> str:
    if not _NAME.match(node) or len(node) > 200:
        raise UsageError(f"node name {node!r}: use letters, digits, '.', '_' and '-'")
    return node


@dataclass(frozen=True)
class History:
    records: list[QualificationRecord]
    """Oldest first."""
    broken: list[str]
    """One line per file that could not be read."""


class QualificationStore:
    """The qualification part of one results folder."""

    def __init__(self, results_dir: Path) -> None:
        self.root = results_dir / "qualify"

    def node_dir(self, node: str) -> Path:
        return self.root / "nodes" / check_node_name(node)

    def save(self, record: QualificationRecord) -> Path:
        path = self.node_dir(record.node) / f"{record.qualification_id}.json"
        atomic.write_json(path, record.to_json())
        return path

    def fleet_dir(self, fleet_id: str) -> Path:
        return self.root / "fleet" / check_node_name(fleet_id)

    def save_order(self, order: NodeOrder) -> Path:
        path = self.fleet_dir(order.fleet_id) / check_node_name(order.node) / ORDER
        atomic.write_json(path, order.to_json())
        return path

    @staticmethod
    def load_order(path: Path) -> NodeOrder:
        """A fleet's order to one node; RecordError when it is damaged or missing."""
        return _required(path, NodeOrder, "no node order there")

    @staticmethod
    def begin(folder: Path, run_id: str) -> RunLock:
        """Make ``folder`` and hold its lock while qualification (or fleet) ``run_id`` runs."""
        folder.mkdir(parents=True, exist_ok=True)
        return RunLock(folder / LOCK, run_id)

    @staticmethod
    def end(lock: RunLock) -> None:
        """Release and remove the lock: the qualification ended in order."""
        lock.release()
        lock.path.unlink(missing_ok=True)

    @staticmethod
    def abandoned(parent: Path) -> list[str]:
        """The ids of the qualifications (fleets) under ``parent`` that a killed mltrain left: a lock
        file there that no live process holds. `forget` one once its jobs are stopped."""
        return [lock.parent.name for lock in sorted(parent.glob(f"*/{LOCK}")) if not is_held(lock)]

    @staticmethod
    def forget(parent: Path, run_id: str) -> None:
        (parent / run_id / LOCK).unlink(missing_ok=True)

    def save_fleet(self, record: FleetRecord) -> Path:
        path = self.root / "fleet" / f"{check_node_name(record.fleet_id)}.json"
        atomic.write_json(path, record.to_json())
        return path

    def nodes(self) -> list[str]:
        folder = self.root / "nodes"
        return sorted(p.name for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []

    def history(self, node: str | None = None) -> History:
        """Every record (of one node), oldest first; unreadable files are listed, not raised."""
        records: list[QualificationRecord] = []
        broken: list[str] = []
        for name in [node] if node else self.nodes():
            folder = self.node_dir(name)
            for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
                try:
                    record = read_record(path, QualificationRecord)
                except RecordError as exc:
                    broken.append(str(exc))
                    continue
                if record is not None and record.node != name:
                    # consistent with where it lives: else it is shown under a node it does not belong to
                    broken.append(f"{path}: the record of node {record.node!r}, under nodes/{name}/: repair or "
                                  "remove it")
                elif record is not None:
                    records.append(record)
        records.sort(key=lambda r: (r.started_at, r.qualification_id))
        return History(records, broken)

    def load(self, path: Path) -> QualificationRecord:
        """One record from a file (a fleet job's output); RecordError when it is damaged or missing."""
        return _required(path, QualificationRecord, "no qualification record was written")

    def fleets(self) -> list[FleetRecord]:
        folder = self.root / "fleet"
        found = [read_record(p, FleetRecord) for p in sorted(folder.glob("*.json"))] if folder.is_dir() else []
        return [f for f in found if f is not None]


def _required(path: Path, model: type[R], missing: str) -> R:
    """The record ``path`` holds; RecordError saying ``missing`` when there is none, naming the field
    when it is damaged."""
    record = read_record(path, model)
    if record is None:
        raise RecordError(f"{path}: {missing}")
    return record
