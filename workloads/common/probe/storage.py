"""Storage: the dataset's files (``DATADIR``, where the runner mounts ``--data``) read once, the
page cache evicted first where the kernel allows it (posix_fadvise, no root needed).

    spec: {"max_mb": 512}

Sanity: every byte of the files was read (as many as their sizes say). Performance: MB/s.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

from workloads.common.probe.harness import Case, Context
from workloads.common.probe.protocol import Outcome, Performance, Sanity

DECLARATION = {
    "name": "storage",
    "kind": "microbenchmark",
    "needs": {"device": "any", "gpus": 0, "data": True},
    "sanity": "every byte of the files was read (as many as their sizes say)",
    "units": {"storage_read_MBps": "MB/s"},
    "sane": {"storage_read_MBps": [0, 1e8]},
    "timeout_s": 600,
    "repeat": True,
    "device_bound": False,
    "remedy": {"wrong": "check_storage", "slow": "check_storage"},
    "settings": {
        "max_mb": {"type": "int", "min": 1, "default": 512, "doc": "read at most this much of the dataset (--data)"},
    },
}
CHECK = DECLARATION["name"]
METRIC = "storage_read_MBps"
CHUNK = 4 << 20


def cases(spec: dict[str, Any], context: Context) -> Iterator[Case]:
    folder = os.environ.get("DATADIR", "")
    files = dataset_files(folder, int(spec["max_mb"]) << 20) if folder else []
    if not files:
        yield Case(check=CHECK, metric=METRIC, skip=f"no dataset files to read in {folder or 'DATADIR'}")
        return
    yield Case(check=CHECK, metric=METRIC, measure=lambda: measure(files))


def measure(files: list[str]) -> Outcome:
    expected = sum(os.path.getsize(path) for path in files)
    evicted = all(evict(path) for path in files)
    total = 0
    started = time.perf_counter()
    for path in files:
        with open(path, "rb", buffering=0) as handle:
            while chunk := handle.read(CHUNK):
                total += len(chunk)
    elapsed = time.perf_counter() - started
    cache = "page cache evicted first (posix_fadvise)" if evicted else "page cache NOT evicted: may read from memory"
    return Outcome(sanity=read_sanity(total, expected),
                   performance=Performance(value=total / elapsed / 1e6, unit="MB/s",
                                           detail=f"{len(files)} files, {total >> 20} MiB; {cache}"))


def read_sanity(read: int, expected: int) -> Sanity:
    """The files gave as many bytes as their sizes say, and some."""
    if expected == 0:
        return Sanity(passed=False, detail="the dataset's files are empty: nothing was read")
    if read != expected:
        return Sanity(passed=False, detail=f"read {read} bytes of {expected}: a file changed or a read came up short")
    return Sanity(passed=True, detail=f"read all {read} bytes")


def dataset_files(folder: str, budget: int) -> list[str]:
    """Regular files under ``folder``, sorted, until ``budget`` bytes."""
    picked: list[str] = []
    total = 0
    for root, dirs, names in os.walk(folder):
        dirs.sort()
        for name in sorted(names):
            path = os.path.join(root, name)
            if os.path.isfile(path) and not name.startswith("."):
                picked.append(path)
                total += os.path.getsize(path)
                if total >= budget:
                    return picked
    return picked


def evict(path: str) -> bool:
    """Ask the kernel to drop a file's cached pages; False where it cannot."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        return True
    except (OSError, AttributeError):
        return False
    finally:
        os.close(fd)
