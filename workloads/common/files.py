"""What a path the workloads read is, when it is not a regular file: one wording for every reader
(a raw KiTS19 case, its kits.json, a seed's trained weights, an inference dataset's lists and images, a
model file)."""

from __future__ import annotations

import errno
import stat
from pathlib import Path


def file_problem(path: Path) -> str | None:
    """Why ``path`` is not a regular file to read, or None."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return "missing file"
    except OSError as err:
        if err.errno == errno.ELOOP:
            return "a symbolic link loop, not a file"
        return f"cannot be read ({err.strerror})"
    if stat.S_ISREG(mode):
        return None
    kind = ("a FIFO" if stat.S_ISFIFO(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
            else "a folder" if stat.S_ISDIR(mode) else "a socket or other special file")
    return f"{kind}, not a file"
