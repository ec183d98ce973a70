"""The seed's own processes, told apart from the rest of the host, and the CPU time they used.

A seed's own processes are mltrain's (this process: the orchestrator and its sampler) and every
process below it (a local seed, its data-loader workers), and every process marked with the run's
id in its environment (`runners.proc.MARK_ENV`: a container's processes, which the engine starts,
not mltrain). Everything else on the host is someone else's work.

`OwnProcesses.step()` returns the CPU seconds the seed's processes used since the previous call. It
is counted per process, so that no process is counted twice: a process that ended and was reaped
inside the tree moves its time into its parent's ``children_*`` counters, and what it had been
counted already is taken off; one seen for the first time counts whole (it started since).
Processes this user cannot read (another user's environment) are someone else's.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import psutil

from orchestrator.runners.proc import MARK_ENV


@dataclass
class _Seen:
    """One of the seed's processes at the previous step."""

    cpu_s: float
    """user + system, its reaped children's included."""
    parent: int
    """Its parent's PID."""


@dataclass
class OwnProcesses:
    """Tracks the seed's process tree from one step to the next (see the module docstring)."""

    mark: str | None = None
    """The run id its processes carry in MARK_ENV (None: only this process's descendants)."""
    root: int = field(default_factory=os.getpid)
    """mltrain's process."""
    counters: Any = psutil
    """psutil, or a module with its API (tests)."""
    _seen: dict[int, _Seen] | None = None
    _marked: dict[tuple[int, float], bool] = field(default_factory=dict)
    """(pid, create time) -> carries the mark; each process's environment is read once."""

    def describe(self) -> str:
        marked = f", and those marked {MARK_ENV}={self.mark}" if self.mark else ""
        return f"mltrain (pid {self.root}) and the processes below it{marked}"

    def step(self) -> tuple[float | None, frozenset[int]]:
        """(CPU seconds the seed's processes used since the last step, their PIDs now); the first
        step has no interval (None)."""
        tree = self._tree()
        now: dict[int, _Seen] = {}
        for pid, parent in tree.items():
            cpu = self._cpu_s(pid)
            if cpu is not None:
                now[pid] = _Seen(cpu, parent)
        previous, self._seen = self._seen, now
        if previous is None:
            return None, frozenset(tree)
        used = 0.0
        for pid, seen in now.items():
            before = previous.get(pid)
            used += seen.cpu_s - before.cpu_s if before is not None else seen.cpu_s
        for pid, gone in previous.items():
            if pid not in now and gone.parent in now:  # reaped inside the tree: its time is in the parent's now
                used -= gone.cpu_s
        return max(used, 0.0), frozenset(tree)

    def _tree(self) -> dict[int, int]:
        """The seed's processes now: PID -> parent PID."""
        parents: dict[int, int] = {}
        created: dict[int, float] = {}
        for process in self.counters.process_iter(["ppid", "create_time"]):
            info = process.info
            if info.get("ppid") is None:
                continue
            parents[process.pid] = info["ppid"]
            created[process.pid] = info.get("create_time") or 0.0
        children: dict[int, list[int]] = {}
        for pid, parent in parents.items():
            children.setdefault(parent, []).append(pid)
        roots = {self.root} | {pid for pid in parents if self._carries_mark(pid, created[pid])}
        self._marked = {key: value for key, value in self._marked.items() if key[0] in parents}
        tree: dict[int, int] = {}
        pending = [pid for pid in roots if pid in parents]
        while pending:
            pid = pending.pop()
            if pid in tree:
                continue
            tree[pid] = parents[pid]
            pending += children.get(pid, [])
        return tree

    def _carries_mark(self, pid: int, created: float) -> bool:
        if self.mark is None or pid == self.root:
            return False
        key = (pid, created)
        if key not in self._marked:
            self._marked[key] = _environment_has(pid, f"{MARK_ENV}={self.mark}".encode())
        return self._marked[key]

    def _cpu_s(self, pid: int) -> float | None:
        try:
            times = self.counters.Process(pid).cpu_times()
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            return None
        return times.user + times.system + getattr(times, "children_user", 0.0) + getattr(
            times, "children_system", 0.0)


def _environment_has(pid: int, entry: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as environ:
            return entry in environ.read().split(b"\0")
    except OSError:  # gone, or another user's
        return False
