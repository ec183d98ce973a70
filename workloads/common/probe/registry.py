"""The probe's checks by name, in their default order: each is a module of this package that plans
its cases from its settings (``cases(spec, context)``, `harness.Case`), each case measuring its
sanity apart from its performance (`protocol.Outcome`).

A new check: a module here with ``CHECK`` and ``cases``, its name below, and its settings in the
orchestrator's suites (``qualify.yaml``, typed in `orchestrator/qualify/config.py`).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Protocol, cast

if TYPE_CHECKING:  # the registry imports without torch, so that settings are checked before torch is
    from workloads.common.probe.harness import Case, Context

CHECKS = ("gemm", "conv", "memory", "storage", "nccl")


class Check(Protocol):
    CHECK: str

    def cases(self, spec: dict[str, Any], context: Context) -> Iterator[Case]: ...


def unknown(names: tuple[str, ...]) -> list[str]:
    """The names among ``names`` that are no check of the probe."""
    return [name for name in names if name not in CHECKS]


def check(name: str) -> Check:
    """The module of check ``name`` (one of `CHECKS`: see `unknown`)."""
    if name not in CHECKS:
        raise KeyError(f"unknown check {name!r}")
    return cast(Check, importlib.import_module(f"{__package__}.{name}"))
