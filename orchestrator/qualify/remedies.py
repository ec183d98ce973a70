"""What a FAIL asks for, kept as a field (`Remediation`: an action, the GPU or node it is for) in the
record's JSON, JUnit's properties and the Prometheus textfile, so that a fleet tool drains, resets,
reboots or opens a ticket without reading the reasons.

A check names the remedy of what it found where it knows it (health: a pending row remap asks for a
GPU reset, a narrow PCIe link for a reseat; the probe: a wrong result on GPU 3 for its replacement);
`remediate` adds the rest from the check's declaration (`Remedies`: a number below its reference asks
for its ``slow`` remedy, on the GPU that measured it) and from the resource errors its reasons quote
(a full disk asks to free it).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from orchestrator.qualify.checks.declaration import Declaration, Remedies
from orchestrator.qualify.devices import split_metric
from orchestrator.results.qualification import CheckResult, Remediation, Remedy, Status
from orchestrator.runners import resource_errors
from orchestrator.runners.resource_errors import ResourceKind

RESOURCE_REMEDIES = {
    ResourceKind.CUDA_OOM: Remedy.INVESTIGATE,
    ResourceKind.HOST_OOM: Remedy.INVESTIGATE,
    ResourceKind.SHARED_MEMORY: Remedy.FIX_SOFTWARE,
    ResourceKind.NCCL: Remedy.CHECK_FABRIC,
    ResourceKind.CUDA_ERROR: Remedy.RESET_GPU,
    ResourceKind.DISK_FULL: Remedy.FREE_DISK,
    ResourceKind.TOO_MANY_FILES: Remedy.FIX_SOFTWARE,
    ResourceKind.GPU_LOST: Remedy.DRAIN_REBOOT,
    ResourceKind.DATALOADER_KILLED: Remedy.INVESTIGATE,
}
"""The remedy of each resource error a job's output shows (`runners.resource_errors`)."""
_RANK = {remedy: rank for rank, remedy in enumerate(Remedy)}


def from_text(said: str, check: str, gpu: int | None = None) -> list[Remediation]:
    """The remedies of the resource errors ``said`` quotes (none: it quotes none)."""
    return [Remediation(action=RESOURCE_REMEDIES[e.kind], check=check, gpu=gpu)
            for e in resource_errors.classify(said) if e.kind in RESOURCE_REMEDIES]


def ordered(found: Iterable[Remediation]) -> tuple[Remediation, ...]:
    """Each remedy once, the most drastic first (`Remedy`'s order), then by GPU."""
    unique = {(r.action, r.check, r.gpu, r.node): r for r in found}
    return tuple(sorted(unique.values(), key=lambda r: (_RANK[r.action], r.check, -1 if r.gpu is None else r.gpu,
                                                        r.node or "")))


def remediate(check: CheckResult, declaration: Declaration | None) -> CheckResult:
    """``check`` (judged) with what its FAIL asks for; nothing unless it FAILed."""
    if check.status is not Status.FAIL:
        return check.model_copy(update={"remediation": ()}) if check.remediation else check
    remedies = declaration.remedies if declaration is not None else Remedies()
    found = list(check.remediation)
    if check.sanity is Status.FAIL and not found:
        found += from_text("\n".join(check.sanity_reasons), check.name)
        found += [] if found else [Remediation(action=remedies.wrong or Remedy.INVESTIGATE, check=check.name)]
    found += [Remediation(action=remedies.slow or Remedy.INVESTIGATE, check=check.name, gpu=split_metric(m.metric)[1])
              for m in check.measurements if m.status is Status.FAIL]
    found += [] if found else [Remediation(action=remedies.wrong or Remedy.INVESTIGATE, check=check.name)]
    return check.model_copy(update={"remediation": ordered(found)})


def of_node(checks: Sequence[CheckResult]) -> tuple[Remediation, ...]:
    """Every FAILed check's remedies together, the most drastic first."""
    return ordered(r for c in checks if c.status is Status.FAIL for r in c.remediation)
