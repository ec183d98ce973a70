"""The one reader of stored files: a JSON file of a results folder as its typed record, validated;
a damaged or foreign one is a `RecordError` naming the file and the field (exit 2)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TypeVar

from pydantic import ValidationError

from orchestrator.config.files import first_problem
from orchestrator.config.reading import RECORD_BYTES, parse_json, read_regular_stat
from orchestrator.errors import RecordError
from orchestrator.results.records import Record

R = TypeVar("R", bound=Record)


def read_record(path: Path | str, model: type[R], *, max_bytes: int = RECORD_BYTES) -> R | None:
    """A stored JSON file as its typed record; None when it does not exist. ``max_bytes``: the bound
    of its kind (`orchestrator.config.reading`: a record's, a telemetry series')."""
    found = read_record_stat(path, model, max_bytes=max_bytes)
    return None if found is None else found[0]


def read_record_stat(path: Path | str, model: type[R], *,
                     max_bytes: int = RECORD_BYTES) -> tuple[R, os.stat_result] | None:
    """`read_record`'s record, and the file's status as it was read (its time, with no system call
    of its own: a first listing reads a file a run and compares its time with the run's)."""
    try:  # a regular file, its JSON bounded in size and depth
        data, info = read_regular_stat(path, max_bytes=max_bytes)
        value = parse_json(data, max_bytes=max_bytes)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise RecordError(f"{path}: unreadable ({' '.join(str(exc).split())}); repair or remove the run folder") \
            from None
    try:
        return model.model_validate(value), info
    except ValidationError as exc:
        raise RecordError(f"{path}: {first_problem(exc, count_others=True)}; repair or remove the run folder") from None
