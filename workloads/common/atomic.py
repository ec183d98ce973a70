"""Atomic writes for every workload: a crash never leaves a half-written file or folder.

A file goes to a temporary sibling (same folder, so the rename stays on one filesystem), is
flushed to disk, and is renamed over its path; a failure removes the temporary file. A folder is
filled in a temporary sibling (``staged_folder``) and renamed onto its path once complete. Files
get mode 0644 and folders 0755 whatever the temporary's default (0600, 0700): datasets and results
are read by other users (a container run as another uid, the orchestrator).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

FILE_MODE = 0o644
DIR_MODE = 0o755


def write_bytes(path: Path, data: bytes) -> None:
    """Write to a temp file in the same folder, fsync, then rename over ``path``."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, FILE_MODE)  # mkstemp makes 0600
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text(path: Path, text: str) -> None:
    """``text`` (UTF-8) written atomically."""
    write_bytes(path, text.encode())


def write_json(path: Path, value: object) -> None:
    """``value`` as indented JSON with sorted keys and a final newline, written atomically."""
    write_text(path, json.dumps(value, indent=2, sort_keys=True) + "\n")


@contextlib.contextmanager
def staged_folder(out: Path) -> Iterator[Path]:
    """A new temporary sibling of ``out`` to fill; renamed onto ``out`` (which must be absent or an
    empty folder) when the block ends well, removed with its content when the block raises."""
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=out.parent))
    try:
        yield staging
        staging.chmod(DIR_MODE)  # mkdtemp makes 0700
        if out.exists():
            out.rmdir()
        os.replace(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
