"""What `mltrain report` reads of its runs, at any number of them: every run counts in the
comparison and the verdict, from the index's rows (`insight.runs.load_setups`: no run opened), and
the newest `SHOWN_PER_SETUP` runs of each setup are read whole for what is drawn and tabled per
seed (accuracy and power plots, the seeds and systems tables). A report of 10,000 runs opened and
drew them all: 100 s and more, a page no one reads."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from orchestrator import collector
from orchestrator.insight.compare import Setup
from orchestrator.insight.runs import RunView, load_setups, view_of
from orchestrator.results.records import IMPORTED_RUNNER
from orchestrator.results.refresh import Listing
from orchestrator.results.store import Store

SHOWN_PER_SETUP = 20
"""The runs of a setup whose seeds a report draws and tables (its newest)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class RunLine:
    """What a setup's verdict says of each of its runs: its own score's validity and reason, its
    rule, when it ran (slotted, as `compare.SeedResult`: one a run, 100,000 in a report)."""

    run_id: str
    setup: str
    valid: bool | None
    """Its summary's verdict; None where it has no summary."""
    reason: str | None
    drop_per_end: int | None
    max_non_converged: int | None
    started_at: str | None
    """For an imported run, when it was imported (when it ran is not known here)."""
    ended_at: str | None
    imported: bool
    """Made elsewhere (`mltrain import`)."""

    @classmethod
    def of_view(cls, view: RunView) -> RunLine:
        summary, manifest = view.run.summary, view.manifest
        return cls(run_id=view.run_id, setup=view.setup_name, valid=summary.valid if summary else None,
                   reason=summary.reason if summary else None, drop_per_end=manifest.rule.drop_per_end,
                   max_non_converged=manifest.rule.max_non_converged, started_at=manifest.started_at,
                   ended_at=manifest.ended_at,
                   imported=manifest.made_elsewhere)

    @classmethod
    def of_row(cls, row: dict[str, Any]) -> RunLine:
        return cls(run_id=row["run_id"], setup=row["label"] or row["run_id"],
                   valid=None if row["valid"] is None else bool(row["valid"]), reason=row["reason"],
                   drop_per_end=row["drop_per_end"], max_non_converged=row["max_non_converged"],
                   started_at=row["started_at"], ended_at=row["ended_at"], imported=row["runner"] == IMPORTED_RUNNER)


@dataclass(frozen=True, kw_only=True)
class ReportRuns:
    setups: list[Setup]
    """Every chosen run, pooled into setups."""
    lines: list[RunLine]
    """Every chosen run, oldest first."""
    views: list[RunView]
    """The runs read whole: the newest `SHOWN_PER_SETUP` of each setup, oldest first."""

    def hidden(self) -> dict[str, int]:
        """Setup -> how many of its runs are not drawn nor tabled (only setups with some)."""
        counts: dict[str, int] = {}
        for line in self.lines:
            counts[line.setup] = counts.get(line.setup, 0) + 1
        for view in self.views:
            counts[view.setup_name] -= 1
        return {setup: count for setup, count in counts.items() if count}


def load_report(store: Store, chosen: Sequence[str], listing: Listing, *,
                shown_per_setup: int = SHOWN_PER_SETUP) -> ReportRuns:
    """The chosen runs (`insight.runs.chosen_runs`, oldest first) as a report reads them."""
    rows = {row["run_id"]: row for row in listing.rows}
    with collector.paused():  # a line per run, no cycle among them
        lines = [RunLine.of_row(rows[run_id]) for run_id in chosen]
    setups = load_setups(store, chosen, listing)
    newest: dict[str, list[str]] = {}
    for line in reversed(lines):
        taken = newest.setdefault(line.setup, [])
        if len(taken) < shown_per_setup:
            taken.append(line.run_id)
    shown = {run_id for ids in newest.values() for run_id in ids}
    views = [view_of(store.open(run_id)) for run_id in chosen if run_id in shown]
    return ReportRuns(setups=setups, lines=lines, views=views)
