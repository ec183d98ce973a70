"""The probe's ``:::PROBE`` lines read back (protocol 2, written by workloads/common/probe/protocol.py,
which describes every kind of line): the device, each case's sanity and performance kept apart,
skips, errors and timings. A line of another shape is ignored; a probe of another protocol is
named (`ProbeRun.protocol_mismatch`), never half read.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from orchestrator.config.reading import parse_json
from orchestrator.qualify.config import DeviceKind
from orchestrator.results.qualification import finite
from orchestrator.runners.outcome import JobOutcome

PREFIX = ":::PROBE "
PROTOCOL = 2
"""The protocol this reader reads; the probe names its own on the device line."""


@dataclass(frozen=True, kw_only=True)
class CaseSanity:
    """Did the case compute the right thing (the product, the copy, the sum), and how it was checked."""

    passed: bool
    detail: str


@dataclass(frozen=True, kw_only=True)
class CasePerformance:
    value: float
    unit: str
    better: Literal["higher", "lower"]
    detail: str


@dataclass(frozen=True, kw_only=True)
class CaseResult:
    """One case's result line."""

    check: str
    metric: str
    gpu: int | None
    """CUDA's index, on a per-GPU case."""
    sanity: CaseSanity
    performance: CasePerformance


@dataclass
class ProbeRun:
    """What the probe said, line by line."""

    device: dict[str, Any] = field(default_factory=dict)
    results: list[CaseResult] = field(default_factory=list)
    skips: list[dict[str, Any]] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    outcome: JobOutcome | None = None
    """How the (first) probe job ended."""
    outcomes: dict[str, JobOutcome] = field(default_factory=dict)
    """Check -> how the probe job that ran it ended (the probe starts again after a check that overran)."""
    overran: dict[str, str] = field(default_factory=dict)
    """Check -> why it was stopped (it passed its timeout)."""
    failure: str = ""
    """Why the probe could not run at all (the runner refused it)."""
    on_event: Callable[[dict[str, Any]], None] = field(default=lambda event: None, repr=False)
    """Called with each line read (a result's after it was found well formed)."""
    pending: list[str] = field(default_factory=list, repr=False)
    """The checks of the job running, in its order, not yet done."""
    since: float = 0.0
    """When the first of them started (its predecessor's timing line, or the device line)."""

    def expect(self, order: Sequence[str]) -> None:
        """A probe job starts, to run ``order``."""
        self.pending, self.since = list(order), time.monotonic()

    @property
    def running(self) -> tuple[str, float] | None:
        """(the check the probe is running, since when), once it said what it runs on."""
        return (self.pending[0], self.since) if self.device and self.pending else None

    def ended(self, names: Sequence[str], outcome: JobOutcome) -> None:
        """The job that ran ``names`` ended so."""
        self.outcome = self.outcome or outcome
        self.outcomes.update({name: outcome for name in names})

    def outcome_of(self, name: str) -> JobOutcome | None:
        return self.outcomes.get(name, self.outcome)

    def observe(self, line: str) -> None:
        at = line.find(PREFIX)
        if at < 0:
            return
        try:
            event = parse_json(line[at + len(PREFIX):])
        except ValueError:
            return
        if not isinstance(event, dict):
            return
        kind = event.get("kind")
        if kind == "device":
            self.device = event
            self.since = time.monotonic()
        elif self.protocol_mismatch:
            return
        elif kind == "result":
            result = case_result(event)
            if result is None:
                return
            self.results.append(result)
        elif kind == "skip":
            self.skips.append(event)
        elif kind == "error":
            self.errors.append(event)
        elif kind == "timing" and finite(event.get("seconds")) is not None:
            check = str(event.get("check"))
            self.timings[check] = float(event["seconds"])
            if check in self.pending:
                del self.pending[:self.pending.index(check) + 1]
                self.since = time.monotonic()
        self.on_event(event)

    @property
    def protocol_mismatch(self) -> str:
        """Why this probe's lines are not read ("" when its protocol is this reader's)."""
        if not self.device:
            return ""
        spoken = self.device.get("protocol", 1)
        if spoken == PROTOCOL:
            return ""
        return (f"the probe speaks protocol {spoken}, this mltrain reads protocol {PROTOCOL}: run the probe of"
                " this checkout (rebuild the workload's image)")

    @property
    def device_kind(self) -> DeviceKind | None:
        kind = self.device.get("device")
        return kind if kind in ("cpu", "cuda") else None


def case_result(event: dict[str, Any]) -> CaseResult | None:
    """A result line as a `CaseResult`; None when it lacks a verdict or a finite number."""
    sanity, performance = event.get("sanity"), event.get("performance")
    if not isinstance(sanity, dict) or not isinstance(performance, dict):
        return None
    passed, value = sanity.get("passed"), finite(performance.get("value"))
    if not isinstance(passed, bool) or value is None:
        return None
    gpu = event.get("gpu")
    return CaseResult(
        check=str(event.get("check")), metric=str(event.get("metric")),
        gpu=gpu if isinstance(gpu, int) and not isinstance(gpu, bool) else None,
        sanity=CaseSanity(passed=passed, detail=str(sanity.get("detail", ""))),
        performance=CasePerformance(value=value, unit=str(performance.get("unit", "")),
                                    better="lower" if performance.get("better") == "lower" else "higher",
                                    detail=str(performance.get("detail", ""))),
    )
