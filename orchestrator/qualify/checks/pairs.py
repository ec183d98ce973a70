"""A probe check run by two nodes at once (its declaration's ``runs: fleet``): a fleet runs it on
pairs of its nodes (`qualify.pairs`), after the nodes' own qualifications; the nodes a slow pair names
FAIL in the fleet's table, each asking to check the fabric."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from orchestrator.qualify import pairs
from orchestrator.qualify.checks.base import result
from orchestrator.qualify.checks.declaration import Declaration
from orchestrator.results.qualification import CheckResult, Reference, Status

if TYPE_CHECKING:
    from orchestrator.qualify.pairs import Finding, Pair, PairReading


@dataclass(frozen=True, kw_only=True)
class FleetContext:
    """What a fleet check runs with: the fleet's nodes, the suite's settings for it, how a batch of
    pairs is measured (`pairs.SlurmPairs`, or a stand-in), the operator's reference for its metric."""

    nodes: Sequence[str]
    settings: Callable[[str], Any]
    """The check's settings between nodes of a kind ("cpu", "cuda"); None: the suite does not run it."""
    measure: Callable[[Sequence[Pair]], list[PairReading]]
    reference: Reference | None = None
    status: Callable[[str], None] = lambda _: None


class PairCheck:
    def __init__(self, declaration: Declaration) -> None:
        self.declaration = declaration

    def run_fleet(self, ctx: FleetContext) -> tuple[CheckResult, list[Finding]]:
        declaration = self.declaration
        if len(set(ctx.nodes)) < declaration.needs.nodes:
            have = len(set(ctx.nodes))
            why = f"{declaration.name} needs {declaration.needs.nodes} or more nodes; the fleet has {have}"
            return result(declaration, Status.NOT_APPLICABLE, [why]), []
        settings = ctx.settings("cuda") or ctx.settings("cpu")
        slow_pct = float(getattr(settings, "slow_pct", 20.0))
        readings = pairs.measure_ring(ctx.nodes, ctx.measure, ctx.status)
        return pairs.judge(readings, declaration, slow_pct, ctx.reference)
