"""The memory a workload process may still take, as ``cpus.py`` counts its CPUs.

A container or a Slurm job gets a share of the host: a cgroup v2 limit (``docker --memory``,
Slurm's ``--mem``: ``memory.max``, of which ``memory.current`` is in use). The host's own
``MemAvailable`` (``/proc/meminfo``: free memory plus what the kernel can reclaim) bounds it too.
What a workload sizes from memory (LoadGen's schedule, a batch) is checked against the smaller.
"""

from __future__ import annotations

from pathlib import Path

MEMINFO = Path("/proc/meminfo")
CGROUP = Path("/sys/fs/cgroup")


def meminfo_available(text: str) -> int | None:
    """Bytes of ``MemAvailable`` in a ``/proc/meminfo`` text; None where it is not there."""
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        if key == "MemAvailable":
            parts = rest.split()
            if parts and parts[0].isdigit():
                return int(parts[0]) * 1024
    return None


def cgroup_headroom(limit: str, current: str) -> int | None:
    """Bytes a cgroup v2 group may still take (``memory.max`` less ``memory.current``); None: no limit."""
    limit, current = limit.strip(), current.strip()
    if limit == "max" or not limit.isdigit() or not current.isdigit():
        return None
    return max(0, int(limit) - int(current))


def available_bytes(meminfo: Path = MEMINFO, cgroup: Path = CGROUP) -> int | None:
    """Bytes this process may still take: the host's available memory, capped by its cgroup's
    headroom; None where neither can be read (not Linux)."""
    found: list[int] = []
    try:
        host = meminfo_available(meminfo.read_text())
    except OSError:
        host = None
    if host is not None:
        found.append(host)
    try:
        headroom = cgroup_headroom((cgroup / "memory.max").read_text(), (cgroup / "memory.current").read_text())
    except OSError:
        headroom = None
    if headroom is not None:
        found.append(headroom)
    return min(found) if found else None
