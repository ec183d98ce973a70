"""Qualification records of schema version 1, upgraded on read to the current version: version 1
named a check that could not run ``error``, version 2 names it ``inconclusive``. Nothing else
changed, so an upgraded record is validated like a new one (`results.qualification`)."""

from __future__ import annotations

from typing import Any

OLD, NEW = "error", "inconclusive"


def _renamed(data: dict[str, Any], *keys: str) -> dict[str, Any]:
    """``data`` with the statuses under ``keys`` renamed (keys it lacks stay missing)."""
    return {**data, **{k: NEW for k in keys if data.get(k) == OLD}}


def _version(data: dict[str, Any]) -> Any:
    return data.get("schema_version", 1)


def upgrade_node(data: Any) -> Any:
    """A node's record (a `QualificationRecord` as JSON) at version 2; anything else as it was."""
    if not isinstance(data, dict) or _version(data) != 1:
        return data
    upgraded = {**_renamed(data, "verdict"), "schema_version": 2}
    if isinstance(data.get("checks"), list):
        upgraded["checks"] = [_check(c) for c in data["checks"]]
    return upgraded


def upgrade_fleet(data: Any) -> Any:
    """A fleet's record (a `FleetRecord` as JSON) at version 2; anything else as it was."""
    if not isinstance(data, dict) or _version(data) != 1:
        return data
    upgraded = {**_renamed(data, "verdict"), "schema_version": 2}
    if isinstance(data.get("rows"), list):
        upgraded["rows"] = [_renamed(r, "verdict") if isinstance(r, dict) else r for r in data["rows"]]
    return upgraded


def _check(check: Any) -> Any:
    if not isinstance(check, dict):
        return check
    upgraded = _renamed(check, "status", "sanity")
    if isinstance(check.get("measurements"), list):
        upgraded["measurements"] = [_renamed(m, "status") if isinstance(m, dict) else m
                                    for m in check["measurements"]]
    return upgraded
