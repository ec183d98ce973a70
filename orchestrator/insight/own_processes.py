"""The seed's own processes, told apart from the rest of the host, and the CPU time they used.

A seed's own processes are mltrain's (this process: the orchestrator and its sampler) and every
process below it (a local seed, its data-loader workers), and every process marked with the run's
id in its environment (`runners.proc.MARK_ENV`: a container's processes, which the engine starts,
not mltrain). Everything else on the host is someone else's work.

`OwnProcesses.step()` returns the CPU seconds the seed's processes used since the previous call. It
is counted per process, so that no process is counted twice: a process that ended and was reaped
inside the tree moves its time into its parent's reaped-children counters, and what it had been
counted already is taken off; one seen for the first time counts whole (it started since).
Processes this user cannot read (another user's environment) are someone else's.

One pass over ``/proc/<pid>/stat`` gives every process's parent and CPU times (about a millisecond
for a hundred processes): the sampler does it every second, on hosts of thousands of processes too.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from orchestrator.runners.proc import MARK_ENV

PROC = Path("/proc")
TICKS_PER_S = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass(frozen=True)
class ProcStat:
    """One process as ``/proc/<pid>/stat`` has it."""

    parent: int
    cpu_s: float
    """user + system, its reaped children's included."""
    started: int
    """Clock ticks after boot it started at (tells a reused PID from the process it was)."""


def read_stat(text: str) -> ProcStat | None:
    """``/proc/<pid>/stat`` read (the command name, in parentheses, may hold spaces and parentheses)."""
    fields = text.rpartition(")")[2].split()
    try:  # fields after the name: state ppid ... utime(11) stime(12) cutime(13) cstime(14) ... starttime(19)
        ticks = int(fields[11]) + int(fields[12]) + int(fields[13]) + int(fields[14])
        return ProcStat(parent=int(fields[1]), cpu_s=ticks / TICKS_PER_S, started=int(fields[19]))
    except (IndexError, ValueError):
        return None


@dataclass
class OwnProcesses:
    """Tracks the seed's process tree from one step to the next (see the module docstring)."""

    mark: str | None = None
    """The run id its processes carry in MARK_ENV (None: only this process's descendants)."""
    root: int = field(default_factory=os.getpid)
    """mltrain's process."""
    proc: Path = PROC
    """The proc filesystem (tests: a folder of <pid>/stat and <pid>/environ files)."""
    _seen: dict[int, ProcStat] | None = None
    _marked: dict[tuple[int, int], bool] = field(default_factory=dict)
    """(pid, start) -> carries the mark; each process's environment is read once."""

    def describe(self) -> str:
        marked = f", and those marked {MARK_ENV}={self.mark}" if self.mark else ""
        return f"mltrain (pid {self.root}) and the processes below it{marked}"

    def step(self) -> tuple[float | None, frozenset[int]]:
        """(CPU seconds the seed's processes used since the last step, their PIDs now); the first
        step has no interval (None)."""
        host = self._processes()
        now = {pid: host[pid] for pid in self._tree(host)}
        previous, self._seen = self._seen, now
        if previous is None:
            return None, frozenset(now)
        used = 0.0
        for pid, seen in now.items():
            before = previous.get(pid)
            same = before is not None and before.started == seen.started
            used += seen.cpu_s - before.cpu_s if same and before is not None else seen.cpu_s
        for pid, gone in previous.items():
            if pid not in now and gone.parent in now:  # reaped inside the tree: its time is in the parent's now
                used -= gone.cpu_s
        return max(used, 0.0), frozenset(now)

    def _processes(self) -> dict[int, ProcStat]:
        found = {}
        base = str(self.proc)
        for name in os.listdir(base):  # os and bytes, not pathlib: this runs every second
            if not name.isdigit():
                continue
            try:
                with open(f"{base}/{name}/stat", "rb") as stat_file:
                    stat = read_stat(stat_file.read().decode(errors="replace"))
            except OSError:  # it ended between the listing and the read
                continue
            if stat is not None:
                found[int(name)] = stat
        return found

    def _tree(self, host: dict[int, ProcStat]) -> list[int]:
        children: dict[int, list[int]] = {}
        for pid, stat in host.items():
            children.setdefault(stat.parent, []).append(pid)
        self._marked = {key: value for key, value in self._marked.items() if key[0] in host}
        pending = [self.root, *(pid for pid, stat in host.items() if self._carries_mark(pid, stat))]
        tree: set[int] = set()
        while pending:
            pid = pending.pop()
            if pid in tree or pid not in host:
                continue
            tree.add(pid)
            pending += children.get(pid, [])
        return sorted(tree)

    def _carries_mark(self, pid: int, stat: ProcStat) -> bool:
        if self.mark is None or pid == self.root:
            return False
        key = (pid, stat.started)
        if key not in self._marked:
            self._marked[key] = self._environment_has(pid, f"{MARK_ENV}={self.mark}".encode())
        return self._marked[key]

    def _environment_has(self, pid: int, entry: bytes) -> bool:
        try:
            return entry in (self.proc / str(pid) / "environ").read_bytes().split(b"\0")
        except OSError:  # gone, or another user's
            return False
