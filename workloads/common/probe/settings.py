"""The probe's settings: JSON in ``MLTRAIN_PROBE_CONFIG``, written by the orchestrator from the
suite (`orchestrator/qualify/micro.py`). Every field is optional:

    {"device": "auto", "seconds_per_case": 0.5, "max_repeats": 200, "threads": null, "data": false,
     "order": ["gemm", "conv", "memory", "storage", "nccl"], "modules": {},
     "cpu": {"gemm": {...}, ...}, "cuda": {"gemm": {...}, ...}}

``cpu`` and ``cuda`` hold each check's settings for that kind of device (the probe uses the kind it
finds); a check without settings there is not run on it, a setting left out has its declared default
(`registry.with_defaults`). ``data``: the dataset's folder was given (``DATADIR`` holds it).
``modules``: check name -> module, for a check registered outside this package. Standard library
only: read before torch.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

from workloads.common.probe.registry import CHECKS

CONFIG_ENV = "MLTRAIN_PROBE_CONFIG"


class SettingsError(ValueError):
    """Settings the probe cannot run with (exit 2)."""


@dataclass(frozen=True, kw_only=True)
class Settings:
    device: str = "auto"
    """auto (CUDA where torch can use it), cuda or cpu."""
    seconds_per_case: float = 0.5
    max_repeats: int = 200
    threads: int | None = None
    """torch's intra-op threads (None: torch's default)."""
    order: tuple[str, ...] = CHECKS
    """The checks to run, in this order."""
    modules: dict[str, str] = field(default_factory=dict)
    """Check name -> module, for checks registered outside this package."""
    data: bool = False
    """``DATADIR`` holds the dataset (``--data``), not an empty stand-in."""
    per_kind: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Device kind -> check name -> its settings."""

    def specs(self, kind: str) -> dict[str, Any]:
        """Each check's settings on a device of ``kind`` ("cpu" or "cuda")."""
        return self.per_kind.get(kind) or {}


def from_environment() -> Settings:
    return parse(os.environ.get(CONFIG_ENV, "{}"))


def parse(text: str) -> Settings:
    """Settings from their JSON; SettingsError naming what is wrong."""
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise SettingsError(f"{CONFIG_ENV} is not JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise SettingsError(f"{CONFIG_ENV} is not a JSON object")
    try:
        per_kind = {kind: dict(raw.get(kind) or {}) for kind in ("cpu", "cuda")}
        settings = Settings(
            device=str(raw.get("device", "auto")), seconds_per_case=float(raw.get("seconds_per_case", 0.5)),
            max_repeats=int(raw.get("max_repeats", 200)), threads=int(raw["threads"]) if raw.get("threads") else None,
            order=tuple(str(name) for name in raw.get("order", CHECKS)), per_kind=per_kind,
            modules={str(k): str(v) for k, v in dict(raw.get("modules") or {}).items()},
            data=bool(raw.get("data", False)),
        )
    except (TypeError, ValueError) as exc:
        raise SettingsError(f"{CONFIG_ENV}: {exc}") from None
    if settings.device not in ("auto", "cuda", "cpu"):
        raise SettingsError(f"{CONFIG_ENV}: device {settings.device!r} is not auto, cuda or cpu")
    if not settings.seconds_per_case > 0 or settings.max_repeats < 1:
        raise SettingsError(f"{CONFIG_ENV}: seconds_per_case and max_repeats must be positive")
    return settings
