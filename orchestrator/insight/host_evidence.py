"""What the seeds of a setup say about their host, and whether a difference between two setups can
be theirs: a difference beside a seed that ran on a disturbed host is not (`insight.quiet` judged
each seed)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from orchestrator import text

if TYPE_CHECKING:
    from orchestrator.insight.compare import Setup

HostVerdict = Literal["quiet", "disturbed", "unknown"]
CAUSES_NAMED = 2
"""Causes named per setup in a sentence (seeds disturbed alike are named together; the rest are counted)."""


@dataclass(frozen=True, kw_only=True)
class HostEvidence:
    """A setup's seeds by the verdict on their host."""

    quiet: int
    disturbed: int
    unknown: int
    causes: tuple[str, ...]
    """'seed 3: the host ran other work in 78% of the seed's time ...', the first few disturbed seeds,
    then how many more."""
    unknown_why: str = ""
    """Why the host of the seeds without a verdict is not known (the first seed's reason)."""

    @property
    def verdict(self) -> HostVerdict:
        if self.disturbed:
            return "disturbed"
        return "unknown" if self.unknown or not self.quiet else "quiet"

    def sentence(self) -> str:
        """'quiet (9 of 9 seeds)', 'disturbed (2 of 9 seeds): seed 3: ...', 'not measured (...)'."""
        total = self.quiet + self.disturbed + self.unknown
        if self.disturbed:
            return f"disturbed ({self.disturbed} of {total} seeds): " + "; ".join(self.causes)
        if self.unknown:
            return f"not measured for {self.unknown} of {total} seeds" + (
                f" ({self.unknown_why})" if self.unknown_why else "")
        return f"quiet ({self.quiet} of {total} seeds)"


def host_evidence(setup: Setup) -> HostEvidence:
    """What the seeds of a setup say about their host."""
    disturbed = [s for s in setup.seeds if s.host == "disturbed"]
    unknown = [s for s in setup.seeds if s.host == "unknown"]
    by_reason = text.seeds_by_reason((seed.seed, seed.host_reason.removeprefix("disturbed: ")) for seed in disturbed)
    causes = [line for line, _ in by_reason[:CAUSES_NAMED]]
    if len(by_reason) > CAUSES_NAMED:
        rest = sum(count for _, count in by_reason[CAUSES_NAMED:])
        causes.append(f"and {rest} more seed(s), each its own way")
    why = "published by MLCommons: not run here" if setup.published else (
        unknown[0].host_reason.removeprefix("not judged: ") if unknown else "")
    return HostEvidence(quiet=len(setup.seeds) - len(disturbed) - len(unknown), disturbed=len(disturbed),
                        unknown=len(unknown), causes=tuple(causes), unknown_why=why)


def attribution(base: Setup, setup: Setup, base_evidence: HostEvidence,
                evidence: HostEvidence) -> tuple[bool, tuple[str, ...]]:
    """Whether a difference between two setups can be the setups' (no seed of either ran on a
    disturbed host), and if not, each disturbed side's causes (``base_evidence``, ``evidence``: each
    side's `host_evidence`)."""
    causes = []
    for side, said in ((setup, evidence), (base, base_evidence)):
        if said.disturbed:
            causes.append(f"{side.name}: " + "; ".join(said.causes))
    return not causes, tuple(causes)
