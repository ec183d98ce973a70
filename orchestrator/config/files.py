"""Reading a YAML file into a typed model: the one way every configuration file of mltrain
(seeds.yaml, workload.yaml, qualify.yaml, a references file) turns a problem into a one-line
ConfigError naming the file and the field."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from orchestrator.errors import ConfigError

M = TypeVar("M", bound=BaseModel)


def one_line(text: str) -> str:
    return " ".join(text.split())


def first_problem(exc: ValidationError, *, count_others: bool = False) -> str:
    """``field a.b: what is wrong`` for the first error (and how many more, when asked)."""
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "(top level)"
    more = f" (and {exc.error_count() - 1} more)" if count_others and exc.error_count() > 1 else ""
    return f"field {where}: {one_line(first['msg'])}{more}"


def read_yaml(path: Path, *, label: str | None = None, missing: str | None = None) -> Any:
    """The parsed file. ``label`` names it in errors (default: its path); ``missing`` is what to
    say when it does not exist (default: the system's own words, like any unreadable file)."""
    label = label or str(path)
    try:
        return yaml.safe_load(path.read_text())
    except FileNotFoundError as exc:
        if missing is None:
            raise ConfigError(f"{label}: cannot read: {one_line(str(exc))}") from None
        raise ConfigError(f"{label}: {missing}") from None
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"{label}: cannot read: {one_line(str(exc))}") from None


def validated(model: type[M], raw: Any, *, label: str) -> M:
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(f"{label}: invalid {first_problem(exc)}") from None
