"""gpu_health: every GPU NVML sees, read before, under and after the load (`qualify.health`), with what
the probe's CUDA saw of them (`qualify.devices.cuda_findings`). Its verdict is sanity only."""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.qualify import devices
from orchestrator.qualify.checks.declaration import Declaration, Remedies
from orchestrator.results.qualification import CheckResult, Remedy

if TYPE_CHECKING:
    from orchestrator.qualify.checks.context import NodeContext


class GpuHealthCheck:
    declaration = Declaration(
        name="gpu_health", kind="health", runs="node", phase="close", settings_at="none",
        sanity="every GPU NVML sees answers, with no pending row remap or page retirement, no uncorrectable ECC"
               " error, no Xid, no hardware slowdown and its full PCIe link under load; CUDA can use each of them",
        units={"gpu*_temperature_max_C": "C"},
        sane={"gpu*_temperature_max_C": (-50, 150)}, timeout_s=120, passive=True,
        remedies=Remedies(wrong=Remedy.INVESTIGATE),
    )

    def run(self, ctx: NodeContext) -> CheckResult:
        probe = ctx.probe.device if ctx.probe is not None else {}
        findings = devices.cuda_findings(ctx.health.gpus, probe, ctx.plan.gpus)
        return ctx.health.result(findings)
