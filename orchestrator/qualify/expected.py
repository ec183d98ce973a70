"""How many GPUs a node is expected to have, and what its verdict says when NVML finds fewer.

A qualification whose GPU checks could not run is never a bare PASS. Where NVML finds no GPU and
nothing says the node has any, the node is WARNed ("GPUs not qualified: none found"); where the
node is expected to have GPUs and NVML finds fewer (a driver that failed to load, a GPU that fell
off the bus), it FAILs. What says so, first found wins: ``--expect-gpus N`` (0: a CPU-only node,
which may PASS), Slurm's gres for the node (a fleet's order carries it), the node's own history
(the most GPUs an earlier qualification of it found).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from orchestrator.results.qualification import QualificationRecord, Remedy, Status


@dataclass(frozen=True, kw_only=True)
class Expected:
    """The GPUs a node is expected to have (None: nothing says), and what says so."""

    count: int | None = None
    source: str = ""


@dataclass(frozen=True, kw_only=True)
class GpuFinding:
    """What the node's verdict says of GPUs it was expected to have, or could not find."""

    status: Status
    reason: str
    remedy: Remedy | None = None


def expected_gpus(given: Expected, history: Sequence[QualificationRecord]) -> Expected:
    """``given`` (``--expect-gpus``, or Slurm's gres through a fleet's order) where it says a count; else
    the most GPUs an earlier qualification of this node found; else nothing."""
    if given.count is not None:
        return given
    seen = max((r.hardware.gpu_count for r in history), default=0)
    if seen:
        found = next(r for r in reversed(history) if r.hardware.gpu_count == seen)
        return Expected(count=seen, source=f"its history: qualification {found.qualification_id} found {seen};"
                                           " --expect-gpus N says what it has now")
    return Expected()


def gpu_finding(expected: Expected, found: int, why_none: str) -> GpuFinding | None:
    """The verdict's word on the node's GPUs: FAIL where NVML finds fewer than expected, WARN where it
    finds none and nothing says the node has any, None where the GPUs are there (or a CPU node is
    declared as such: ``--expect-gpus 0``)."""
    if expected.count is not None and found < expected.count:
        seen = f"NVML finds {found} GPU(s)" + (f" ({why_none})" if found == 0 and why_none else "")
        return GpuFinding(status=Status.FAIL, remedy=Remedy.DRAIN_REBOOT, reason=(
            f"GPUs not qualified: {seen}, but this node is expected to have {expected.count} ({expected.source}):"
            " a driver that failed to load or a GPU that fell off the bus"))
    if found == 0 and expected.count is None:
        return GpuFinding(status=Status.WARN, reason=(
            f"GPUs not qualified: none found ({why_none or 'NVML reports no GPU'}); --expect-gpus 0 qualifies a"
            " CPU-only node, --expect-gpus N fails a node whose N GPUs are not all found"))
    return None
