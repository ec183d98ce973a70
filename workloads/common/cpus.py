"""The CPUs a workload process may use, and the threads that follows from them.

A container or a Slurm job gets a share of the host: an affinity mask (``--cpuset-cpus``, Slurm's
binding) or a cgroup v2 quota (``docker --cpus``: ``cpu.max``). ``os.cpu_count()`` sees neither;
``usable_cpus`` sees both, and every count of CPUs in the workloads (intra-op threads, loader
workers, parallel dataset preparation) starts from it.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

CGROUP_CPU_MAX = Path("/sys/fs/cgroup/cpu.max")
"""cgroup v2's CPU quota of this process's group ('QUOTA PERIOD' or 'max PERIOD')."""


def cgroup_cpu_quota(text: str) -> float | None:
    """CPUs a cgroup v2 ``cpu.max`` line allows ("max 100000": no limit, None; "150000 100000": 1.5)."""
    parts = text.split()
    if len(parts) != 2 or parts[0] == "max":
        return None
    try:
        quota, period = int(parts[0]), int(parts[1])
    except ValueError:
        return None
    return quota / period if quota > 0 and period > 0 else None


def usable_cpus(cpu_max: Path | None = None) -> int:
    """CPUs this process may run on (its affinity mask), capped by a cgroup v2 quota when one is
    set (``cpu_max``, default ``CGROUP_CPU_MAX``); at least 1."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cpus = os.cpu_count() or 1
    try:
        quota = cgroup_cpu_quota((CGROUP_CPU_MAX if cpu_max is None else cpu_max).read_text())
    except OSError:
        quota = None
    if quota is not None:
        cpus = min(cpus, max(1, math.floor(quota)))
    return max(1, cpus)


def threads_per_process(cpus: int, processes: int) -> int:
    """Intra-op threads for ``auto``: ``cpus`` shared by the ``processes`` on this node, at least 1."""
    return max(1, cpus // max(1, processes))
