"""A qualification check's declaration: what it is, what it needs, how it is judged, how long it may
run, whether the quorum may repeat it, what a FAIL asks for, and the type of its settings in
qualify.yaml. Declared once per check; everything that used to list the checks derives from it.

A probe check declares itself in its module of ``workloads/common/probe/`` (``DECLARATION``, a
literal), which the orchestrator reads as data (`probe_declared`); an orchestrator check declares
itself in its own module here (`registry`).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from orchestrator.config.numbers import TimeoutMinutes
from orchestrator.qualify.devices import split_metric
from orchestrator.results.qualification import CheckKind, Reference, Remedy

Runs = Literal["node", "probe", "job", "fleet"]
"""Where a check runs: on the node in mltrain's own process (NVML, dcgmi), in the probe's job with the
other probe checks, as a job of its own through the runner, or across nodes (a fleet's)."""
Phase = Literal["load", "after", "close"]
"""When a node runs it: under load (the health sampler running), after the load, or last (health's
verdict, which reads what the others saw)."""
SettingsAt = Literal["device", "suite", "none"]
"""Where a suite gives its settings: per kind of device (``cpu:``/``cuda:``), on the suite itself
(``time_to_train:``), or nowhere (it always runs)."""


class CheckSettings(BaseModel):
    """What every check's settings share."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid", allow_inf_nan=False)

    timeout_minutes: TimeoutMinutes | None = None
    """How long the check may run before it is stopped (INCONCLUSIVE); None: its declared timeout."""


@dataclass(frozen=True, kw_only=True)
class Needs:
    """What a check needs to apply; where it is missing the check is not applicable, saying which."""

    device: Literal["any", "cuda"] = "any"
    gpus: int = 0
    """At least this many GPUs (CUDA's, where it runs)."""
    nodes: int = 1
    """At least this many nodes (a fleet's check)."""
    runners: tuple[str, ...] = ()
    """Only on these runners (empty: any)."""
    data: bool = False
    """The dataset's folder (--data)."""


@dataclass(frozen=True, kw_only=True)
class Remedies:
    """What a FAIL asks for, by what failed (the check may name a more precise one per finding)."""

    wrong: Remedy | None = None
    """Its sanity failed: a wrong result, a fault found."""
    slow: Remedy | None = None
    """A number below (or above) its reference."""


@dataclass(frozen=True, kw_only=True)
class Declaration:
    """One check, declared once."""

    name: str
    kind: CheckKind
    runs: Runs
    phase: Phase = "load"
    settings_at: SettingsAt = "device"
    needs: Needs = field(default_factory=Needs)
    sanity: str
    """Its sanity rule in words, apart from its numbers (ReFrame's split)."""
    units: Mapping[str, str] = field(default_factory=dict)
    """Each metric it measures (a glob over the metric without its ``_gpu<i>``) -> its unit: what a
    reference for it must be in."""
    sane: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    """Each metric it measures (a glob, as in ``units``) -> (above, at most): the range a number of it
    can have at all. Outside it (a negative rate, a zero, a rate no device reaches) it is no
    measurement, and the check is INCONCLUSIVE (`insane`), never judged, never PASS."""
    floors: Mapping[str, tuple[float, str]] = field(default_factory=dict)
    """The check's own default floor, on any hardware: each metric (a glob, as in ``units``) -> (its
    bound on the bad side, in the metric's declared unit, and the source that says so). A known GPU
    model's floor (`floors.yaml`) comes first; the operator's references and the node's history as
    for any floor (`references.References.pick`)."""
    timeout_s: float
    """How long it may run (its settings' ``timeout_minutes`` replaces it)."""
    repeat: bool = False
    """The quorum may measure a number of it that failed its reference again."""
    device_bound: bool = False
    """Its numbers are the device's: run on the CPU of a node whose GPUs CUDA cannot use, it FAILs."""
    passive: bool = False
    """It reads the node's state and loads nothing: alone, it qualifies nothing (`judge.node_verdict`)."""
    remedies: Remedies = field(default_factory=Remedies)
    settings: type[BaseModel] | None = None
    """The type of its settings in qualify.yaml (None: it has none)."""
    module: str = ""
    """A probe check's module (the probe imports it by this name where it is not one of its own)."""

    def unit(self, metric: str) -> str | None:
        """The unit of a metric this check measures (``metric`` without its ``_gpu<i>``); None when
        the check declares no such metric."""
        return next((unit for pattern, unit in self.units.items() if fnmatch.fnmatchcase(metric, pattern)), None)

    def floor(self, metric: str, unit: str, better: str) -> Reference | None:
        """The check's own floor of ``metric`` (with or without its ``_gpu<i>``) measured in ``unit``
        (None: it declares none, or in another unit)."""
        base = split_metric(metric)[0]
        found = next((f for pattern, f in self.floors.items() if fnmatch.fnmatchcase(metric, pattern)
                      or fnmatch.fnmatchcase(base, pattern)), None)
        if found is None or self.unit(base) != unit:
            return None
        bound, source = found
        lower, upper = (bound, None) if better == "higher" else (None, bound)
        return Reference(value=bound, lower=lower, upper=upper, unit=unit, kind="floor",
                         source=f"floor {bound:g} {unit}, {self.name}'s own; source: {source}")

    def insane(self, metric: str, value: float, unit: str = "") -> str:
        """Why ``value`` of ``metric`` (with or without its ``_gpu<i>``) is no measurement ("" when it
        is within its declared range); a metric it declares no range for has none that it can meet."""
        base = split_metric(metric)[0]
        found = next((r for pattern, r in self.sane.items() if fnmatch.fnmatchcase(metric, pattern)
                      or fnmatch.fnmatchcase(base, pattern)), None)
        shown = f"{metric} {value:g}{' ' + unit if unit else ''}"
        if found is None:
            return f"{shown}: {self.name} declares no sane range for it, so it is no measurement"
        above, at_most = found
        if above < value <= at_most:
            return ""
        return (f"{shown} is no measurement: a {self.name} number is above {above:g} and at most {at_most:g}"
                " (its sanity rule): the check measured nothing the node can be judged by")

    def timeout(self, settings: BaseModel | None) -> float:
        """Seconds it may run: its settings' ``timeout_minutes``, else its declared timeout."""
        given = getattr(settings, "timeout_minutes", None)
        return given * 60 if given is not None else self.timeout_s


# ---------------------------------------------------------------- a probe check's settings, typed


_SCALARS: dict[str, type] = {"int": int, "float": float}
_BOUNDS = {"min": "ge", "max": "le", "below": "lt"}
"""A scalar's bounds as a declaration writes them -> pydantic's: at least, at most, below."""


def _scalar(spec: Mapping[str, Any] | str) -> Any:
    """The type of one scalar: ``int``/``float``, or ``{"type": ..., "min"/"max"/"below": ...}`` (finite,
    within its bounds)."""
    spec = {"type": spec} if isinstance(spec, str) else spec
    bounds = {_BOUNDS[k]: v for k, v in spec.items() if k in _BOUNDS}
    return Annotated[_SCALARS[spec["type"]], Field(allow_inf_nan=False, **bounds)]


def settings_model(name: str, declared: Mapping[str, Mapping[str, Any]]) -> type[CheckSettings]:
    """The settings type of a probe check from its declaration's ``settings`` (see the probe's
    `registry`): ``int``/``float`` (``min``: at least, ``max``: at most, ``below``), ``choices`` (a list
    of ``of``), ``rows`` (a list of rows of ``row``'s scalars, each a type or a type with its bounds);
    each field its ``default``. Frozen, unknown keys refused."""
    fields: dict[str, Any] = {}
    for key, spec in declared.items():
        kind = spec.get("type")
        if kind in _SCALARS:
            annotation: Any = _scalar(spec)
            default = spec["default"]
        elif kind == "choices":
            annotation = tuple[Literal[tuple(spec["of"])], ...]  # type: ignore[misc]
            default = tuple(spec["default"])
        elif kind == "rows":
            annotation = tuple[tuple[tuple(_scalar(t) for t in spec["row"])], ...]  # type: ignore[misc]
            default = tuple(tuple(row) for row in spec["default"])
        else:
            raise ValueError(f"{name}: setting {key!r} has no type this reader knows ({kind!r})")
        fields[key] = (annotation, Field(default=default, description=str(spec.get("doc", ""))))
    return create_model(f"{name.title().replace('_', '')}Settings", __base__=CheckSettings, **fields)
