"""The one shape of a fact that could not be read: ``{"available": false, "reason": ...}``; a missing
value is never written as a zero."""

from __future__ import annotations

from typing import Any


def unavailable(reason: str) -> dict[str, Any]:
    """The one shape of a value that could not be read."""
    return {"available": False, "reason": reason}


def is_unavailable(value: object) -> bool:
    return isinstance(value, dict) and value.get("available") is False
