"""Atomic writes for the unet3d dataset code: a crash never leaves a half-written file or folder."""

from __future__ import annotations

import io
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

FILE_MODE = 0o644
DIR_MODE = 0o755


def write_bytes(path: Path, data: bytes) -> None:
    """Write to a temp file in the same folder, fsync, then rename over ``path``."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, FILE_MODE)  # mkstemp makes 0600; datasets are read by other users (containers)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json(path: Path, value: Any) -> None:
    write_bytes(path, (json.dumps(value, indent=2, sort_keys=True) + "\n").encode())


def npy_bytes(array: np.ndarray) -> bytes:
    """The exact bytes ``np.save(path, array, allow_pickle=False)`` writes."""
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()
