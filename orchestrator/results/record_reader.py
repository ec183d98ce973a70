"""The one reader of stored files: a JSON file of a results folder as its typed record, validated;
a damaged or foreign one is a `RecordError` naming the file and the field (exit 2). A cache kept
beside the records (`read_cache_stat`) is read in one pass, and is used or ignored, never an error."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TypeVar

from pydantic import ValidationError

from orchestrator.config.files import first_problem
from orchestrator.config.reading import RECORD_BYTES, read_json, read_regular_stat
from orchestrator.errors import RecordError
from orchestrator.results.records import Record

R = TypeVar("R", bound=Record)


def read_record(path: Path | str, model: type[R], *, max_bytes: int = RECORD_BYTES) -> R | None:
    """A stored JSON file as its typed record; None when it does not exist. ``max_bytes``: the bound
    of its kind (`orchestrator.config.reading`: a record's, a telemetry series')."""
    try:
        data = read_json(path, max_bytes=max_bytes)  # a regular file, its JSON bounded in size and depth
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise RecordError(f"{path}: unreadable ({' '.join(str(exc).split())}); repair or remove the run folder") \
            from None
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise RecordError(f"{path}: {first_problem(exc, count_others=True)}; repair or remove the run folder") from None


def read_cache_stat(path: str, model: type[R], *, max_bytes: int = RECORD_BYTES) -> tuple[R, os.stat_result] | None:
    """A cache mltrain keeps beside a run's records (its index rows, `results.index_rows`) as its
    typed record, and the file's status as its descriptor had it (its time, with no system call of
    its own); None where there is none, or none that is such a record: not a regular file within
    ``max_bytes``, not JSON, nested deeper than pydantic's parser goes (it stops, it does not
    recurse without end), or of another shape. A cache is used or ignored, never an error: the
    caller reads what it stands for instead.

    Validated from the bytes in one pass, pydantic's parser and validator at once, with no Python
    values between: about 60% of the time of parsing, then validating (a first listing reads a
    file a run, 100,000 runs and more)."""
    try:
        data, info = read_regular_stat(path, max_bytes=max_bytes)
        return model.model_validate_json(data), info
    except (OSError, ValueError):  # ValidationError is a ValueError: not JSON, too deep, another shape
        return None
