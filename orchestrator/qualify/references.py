"""References, ReFrame style: metric -> (value, lower, upper, unit) per GPU model (or CPU model),
from the operator's YAML file, learned from the node's own history or the fleet's, or a known GPU
model's floor (`floors`). Every reference says where it came from; nothing here invents a number.

Which one judges a measurement (`References.pick`): the operator's, where the file gives the metric
(for a per-GPU case ``<metric>_gpu<i>``, the one given for ``<metric>``); else the strictest of the
node's history, the fleet's history and the model's floor (the highest lower bound of a
higher-is-better metric, the lowest upper bound of a lower-is-better one; on a tie, in that order).

The operator's file (``--references FILE``); thresholds are fractions of the value, as in ReFrame
(-0.1: 10 % below; null: unbounded), and every system names the source of its numbers:

    systems:
      - model: NVIDIA H100 80GB HBM3          # the GPU's NVML name, or the CPU's /proc/cpuinfo model
        source: acceptance runs of 2025-03-01 on gpu[01-16], median of 5
        references:
          gemm_bf16_8192x8192x8192: [700.0, -0.10, null, TFLOP/s]
          throughput_samples_per_s: [25.0, -0.05, 0.20, samples/s]

Learned: the median and MAD of the last K passing runs of the same node on the same hardware and
software (`HistoryPolicy`), bounds median -+ max(k x 1.4826 x MAD, floor % of the median).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from orchestrator.config.files import read_yaml, validated
from orchestrator.qualify.checks.declaration import Declaration
from orchestrator.qualify.config import HistoryPolicy
from orchestrator.qualify.devices import split_metric
from orchestrator.results.qualification import (
    Hardware,
    Measurement,
    QualificationRecord,
    Reference,
    ReferenceKind,
    Status,
)

MAD_TO_SIGMA = 1.4826
"""MAD of a normal distribution times this is its standard deviation."""


class _Frozen(BaseModel):
    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid", allow_inf_nan=False)
    """No infinity and no NaN: -inf would pass every number, +inf fail every node."""


class SystemReferences(_Frozen):
    model: str = Field(min_length=1)
    """GPU model as NVML names it, CPU model as /proc/cpuinfo does, or * for any."""
    source: str = Field(min_length=3)
    """Where the numbers come from (runs, dates, nodes): a reference without one is refused."""
    references: dict[str, tuple[float, float | None, float | None, str]]

    @field_validator("references")
    @classmethod
    def _thresholds(cls, value: dict[str, tuple[float, float | None, float | None, str]]) -> dict:
        for metric, (_, lower, upper, _unit) in value.items():
            if lower is not None and not -1.0 <= lower <= 0.0:
                raise ValueError(f"{metric}: lower threshold {lower} must be a fraction in [-1, 0] (ReFrame style)")
            if upper is not None and upper < 0.0:
                raise ValueError(f"{metric}: upper threshold {upper} must be a fraction >= 0 (ReFrame style)")
        return value


class ReferenceFile(_Frozen):
    systems: tuple[SystemReferences, ...]

    @model_validator(mode="after")
    def _one_entry_per_model(self) -> ReferenceFile:
        seen: set[str] = set()
        for system in self.systems:
            if system.model in seen:
                raise ValueError(f"model {system.model!r} is listed twice: merge its references into one entry")
            seen.add(system.model)
        return self


class OperatorReferences:
    """The references of one file, looked up by hardware."""

    def __init__(self, path: Path, parsed: ReferenceFile) -> None:
        self.path = path
        self.parsed = parsed

    def for_hardware(self, hardware: Hardware) -> dict[str, Reference]:
        """The references of this node's model (an exact model beats ``*``)."""
        found: dict[str, Reference] = {}
        for wanted in ("*", hardware.model):
            for system in self.parsed.systems:
                if system.model != wanted:
                    continue
                for metric, (value, lower, upper, unit) in system.references.items():
                    found[metric] = Reference(
                        value=value, unit=unit, kind="operator",
                        lower=None if lower is None else value * (1 + lower),
                        upper=None if upper is None else value * (1 + upper),
                        source=f"{self.path.name} ({system.model}): {system.source}",
                    )
        return found


def unmatched_metrics(references: OperatorReferences, checks: Sequence[Declaration]) -> list[str]:
    """Warnings, one per reference that cannot judge anything: its metric is none a check declares
    (`Declaration.units`), or it is in another unit than the check measures it in."""
    found = []
    for system in references.parsed.systems:
        where = f"{references.path.name} ({system.model})"
        for metric, (_, _, _, unit) in system.references.items():
            base = split_metric(metric)[0]
            owner = next((c for c in checks if c.unit(base) is not None), None)
            if owner is None:
                found.append(f"{where}: no check measures {metric!r}: its reference judges nothing")
            elif owner.unit(base) != unit:
                found.append(f"{where}: {metric} is in {unit}, but {owner.name} measures it in {owner.unit(base)}:"
                             " its reference judges nothing")
    return found


def unmatched_models(references: OperatorReferences, hardware: Sequence[Hardware]) -> list[str]:
    """A warning naming the models of the file (``*`` aside) that no node of ``hardware`` is."""
    models = {h.model for h in hardware}
    stray = [s.model for s in references.parsed.systems if s.model != "*" and s.model not in models]
    if not stray:
        return []
    return [f"{references.path.name}: no node qualified here is a {', '.join(repr(m) for m in stray)} (the nodes:"
            f" {', '.join(repr(m) for m in sorted(models))}): those references judged nothing"]


def load_references(path: Path) -> OperatorReferences:
    label = f"--references {path}"
    return OperatorReferences(path, validated(ReferenceFile, read_yaml(path, label=label, missing="file not found"),
                                              label=label))


# ---------------------------------------------------------------- learned from history


def comparable_history(
    history: list[QualificationRecord], hardware: Hardware, software: dict[str, str], policy: HistoryPolicy,
) -> tuple[list[QualificationRecord], str]:
    """The last K passing runs on the same hardware and software, oldest first, and a sentence
    saying why there are not more."""
    same_hardware = [r for r in history if r.hardware.key == hardware.key]
    same = [r for r in same_hardware if r.software == software]
    passing = passing_runs(history, hardware, software)[-policy.runs:]
    if len(passing) >= policy.min_runs:
        return passing, ""
    changed = ""
    if same_hardware and not same:
        last = same_hardware[-1].software
        diffs = [f"{k} {last.get(k)} -> {v}" for k, v in sorted(software.items()) if last.get(k) != v]
        changed = f"; the software changed since the last run ({', '.join(diffs[:3])})" if diffs else ""
    why = (f"{len(passing)} of the {policy.min_runs} passing runs on this hardware and software needed to learn"
           f" references{changed}")
    return passing, why


def passing_runs(
    history: list[QualificationRecord], hardware: Hardware, software: dict[str, str],
) -> list[QualificationRecord]:
    """Every run that PASSed or WARNed on the same hardware and software, oldest first: the runs a
    node's numbers are learned from (and its drift measured on)."""
    return [r for r in history if r.hardware.key == hardware.key and r.software == software
            and r.verdict in (Status.PASS, Status.WARN)]


def learned_references(
    history: list[QualificationRecord], policy: HistoryPolicy, kind: ReferenceKind = "history",
) -> dict[str, Reference]:
    """Per metric: median and MAD of the passing runs' values (FAILed measurements left out); of one
    node's runs (kind history) or of the fleet's (kind fleet)."""
    values: dict[str, list[tuple[float, str, str]]] = {}
    for record in history:
        for measurement in record.measurements().values():
            if measurement.status is not Status.FAIL:
                values.setdefault(measurement.metric, []).append(
                    (measurement.value, measurement.unit, measurement.better))
    learned: dict[str, Reference] = {}
    for metric, points in values.items():
        if len(points) < policy.min_runs:
            continue
        numbers = [v for v, _, _ in points]
        median = statistics.median(numbers)
        mad = statistics.median(abs(v - median) for v in numbers) * MAD_TO_SIGMA
        tolerance = max(policy.k_mad * mad, abs(median) * policy.floor_pct / 100)
        first, last = history[0].qualification_id, history[-1].qualification_id
        nodes = len({r.node for r in history})
        whose = f" of {nodes} node(s) of the fleet" if kind == "fleet" else ""
        learned[metric] = Reference(
            value=median, lower=median - tolerance, upper=median + tolerance, unit=points[-1][1], kind=kind,
            source=f"median and MAD of the last {len(numbers)} passing runs{whose} on the same hardware and software"
                   f" ({first} .. {last}), +-max({policy.k_mad:g} MAD, {policy.floor_pct:g}%)",
        )
    return learned


@dataclass(frozen=True)
class References:
    """Every reference a node's measurements may be judged by, and the rule that picks one."""

    operator: dict[str, Reference] = field(default_factory=dict)
    node: dict[str, Reference] = field(default_factory=dict)
    """Learned from this node's passing runs (also the rolling median a regression is measured from)."""
    fleet: dict[str, Reference] = field(default_factory=dict)
    floors: dict[str, Reference] = field(default_factory=dict)

    def pick(self, m: Measurement) -> Reference | None:
        given = self.operator.get(m.metric) or self.operator.get(split_metric(m.metric)[0])
        if given is not None:
            return given
        return strictest([self.node.get(m.metric), self.fleet.get(m.metric), self.floors.get(m.metric)], m.better)

    def rolling(self, m: Measurement) -> Reference | None:
        return self.node.get(m.metric)


def strictest(candidates: Sequence[Reference | None], better: str) -> Reference | None:
    """The reference whose bound on the bad side is the strictest (the first of equals)."""
    found = [c for c in candidates if c is not None]
    if better == "higher":
        bounds = [c.lower if c.lower is not None else float("-inf") for c in found]
        best = max(bounds, default=None)
    else:
        bounds = [c.upper if c.upper is not None else float("inf") for c in found]
        best = min(bounds, default=None)
    return next((c for c, bound in zip(found, bounds, strict=True) if bound == best), None)
