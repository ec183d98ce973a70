"""dcgm_diag: NVIDIA DCGM's diagnostics at the suite's level (`qualify.dcgm`), where DCGM is installed;
its timeout is its level's (`dcgm.LEVEL_TIMEOUT_S`: 5 min at level 1 to 4 h at level 4), which
`dcgm_check` holds; the declared one, the longest and a minute, only backs it up."""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.qualify.checks.declaration import Declaration, Remedies
from orchestrator.qualify.dcgm import LEVEL_TIMEOUT_S, dcgm_check
from orchestrator.results.qualification import CheckResult, Remedy

if TYPE_CHECKING:
    from orchestrator.qualify.checks.context import NodeContext


class DcgmCheck:
    declaration = Declaration(
        name="dcgm_diag", kind="health", runs="node", phase="after", settings_at="none",
        sanity="every test of `dcgmi diag -r <dcgm_level>` passes (a Warn warns, a Skip passes)",
        timeout_s=max(LEVEL_TIMEOUT_S.values()) + 60, remedies=Remedies(wrong=Remedy.REPLACE),
    )

    def run(self, ctx: NodeContext) -> CheckResult:
        return dcgm_check(ctx.plan.suite.dcgm_level, ctx.health.gpu_count)
