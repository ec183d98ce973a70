"""A probe check, as the orchestrator sees it: its declaration read from the probe's module (data, not
an import), run with the other probe checks of its attempt in one probe job (`micro.run_probe`, once per
attempt), its lines turned into its result (`micro.probe_check`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.qualify import micro
from orchestrator.qualify.checks.declaration import Declaration
from orchestrator.results.qualification import CheckResult

if TYPE_CHECKING:
    from orchestrator.qualify.checks.context import NodeContext


class ProbeCheck:
    def __init__(self, declaration: Declaration) -> None:
        self.declaration = declaration

    def run(self, ctx: NodeContext) -> CheckResult:
        if ctx.probe is None:
            ctx.probe = micro.probe_for(ctx)
        return micro.probe_check(self.declaration, ctx.probe, ctx.plan.suite, ctx.gpus)
