"""Time in arithmetic: mltrain keeps milliseconds; MLCommons' result summarizer and the published
results count minutes. The one place that converts between the two (`orchestrator.text` is
the one place that writes either for people)."""

from __future__ import annotations

MS_PER_MINUTE = 60_000.0


def minutes(ms: float | None) -> float | None:
    """Milliseconds in minutes, the summarizer's unit; None stays None."""
    return None if ms is None else ms / MS_PER_MINUTE


def ms_from_minutes(value: float) -> float:
    """Minutes (the summarizer's, the published results') in milliseconds."""
    return value * MS_PER_MINUTE
