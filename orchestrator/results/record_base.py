"""The base of every typed record mltrain stores: frozen, strict about unknown fields, JSON in and out,
its validator built at its first use (`defer_build`, as every model's: docs/architecture.md)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


class Record(BaseModel):
    """Frozen, strict about unknown fields, and JSON in and out."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    @classmethod
    def from_json(cls, data: Any) -> Any:
        return cls.model_validate(data)
