"""The one reader of stored files: a JSON file of a results folder as its typed record, validated;
a damaged or foreign one is a `RecordError` naming the file and the field (exit 2)."""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

from pydantic import ValidationError

from orchestrator.config.files import first_problem
from orchestrator.config.reading import RECORD_BYTES, read_json
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
