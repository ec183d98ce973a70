"""The qualification history as one self-contained HTML page: per node its verdicts, then each
metric over the nights with the bounds it was judged against (`mltrain qualify history --html`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from orchestrator.render import report_plots
from orchestrator.render.report import _table, esc, page_head
from orchestrator.render.report_plots import Plot, plot_html
from orchestrator.results.qualification import QualificationRecord


def qualification_page(records: Sequence[QualificationRecord], title: str = "mltrain qualification history") -> str:
    """A self-contained page of qualification history: verdicts, and one trend per metric with its bounds."""
    parts = [
        *page_head(title, f"{len(records)} qualification(s)"),
        qualification_section(records),
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"


def qualification_section(records: Sequence[QualificationRecord]) -> str:
    """Per node: its verdicts, then each metric over time with the bounds it was judged against."""
    if not records:
        return '<h2>Qualification</h2><p class="note">no qualification recorded</p>'
    parts = ["<h2>Qualification</h2>"]
    for node in sorted({r.node for r in records}):
        mine = [r for r in records if r.node == node]
        parts.append(f"<h3>{esc(node)} ({esc(mine[-1].hardware.key)})</h3>")
        rows = [[esc(r.started_at), esc(r.suite), esc(r.verdict.word), esc(r.runner),
                 "<br>".join(esc(x) for x in r.reasons[:3]) or "-"] for r in mine]
        parts.append(_table(("started", "suite", "verdict", "runner", "reasons"), rows))
        metrics = sorted({m for r in mine for m in r.measurements()})
        for metric in metrics:
            parts.append(plot_html(metric_trend_plot(mine, metric)))
    return "\n".join(parts)


def metric_trend_plot(records: Sequence[QualificationRecord], metric: str) -> Plot:
    """One metric of a node over its qualifications, in their order: its value (a dot coloured by its
    verdict), the bounds it was judged against and the rolling median of the nights before."""
    points = [(r, r.measurements()[metric]) for r in records if metric in r.measurements()]
    unit = points[-1][1].unit
    chart = report_plots.chart(TREND_SIZE, y_label=unit)
    x = np.arange(1, len(points) + 1, dtype=float)
    values = np.array([m.value for _, m in points], dtype=float)
    chart.lines([np.column_stack([x, values])], "#1f77b4", width=1)
    for side in ("lower", "upper"):
        bounds = [(at, getattr(m.reference, side)) for at, (_, m) in zip(x, points, strict=True)
                  if m.reference is not None and getattr(m.reference, side) is not None]
        if bounds:
            chart.lines([_steps(np.array(bounds, dtype=float))], "#888", width=0.8, dash="dashed")
    medians = [(at, m.rolling_median) for at, (_, m) in zip(x, points, strict=True) if m.rolling_median is not None]
    if medians:
        chart.lines([np.array(medians, dtype=float)], "#444", width=0.8, dash="dotted")
    statuses = [m.status.value for _, m in points]
    for status in dict.fromkeys(statuses):
        shown = np.array([s == status for s in statuses])
        chart.dots(x[shown], values[shown], STATUS_COLORS.get(status, "#444"), radius=report_plots.DOT * chart.font)
    chart.categories([r.started_at[5:16] for r, _ in points])
    sources = sorted({f"{m.reference.kind}: {m.reference.source}" for _, m in points if m.reference is not None})
    note = "dots: pass green, warn orange, fail red, grey not judged; dashed: bounds; dotted: rolling median"
    if sources:
        note += "; references: " + " | ".join(sources[-2:])
    return Plot(title=f"{metric} ({unit})", image=chart.svg(), note=note)


TREND_SIZE = (8.0, 3.0)
"""Inches of a metric's trend, at the report's `report_plots.PLOT_DPI`."""
STATUS_COLORS = {"pass": "#2ca02c", "warn": "#ff7f0e", "fail": "#d62728"}


def _steps(points: np.ndarray) -> np.ndarray:
    """A line of (x, y) rows drawn as steps, each value level from halfway to its neighbour before
    to halfway to the one after (matplotlib's ``step(where="mid")``)."""
    x, y = points[:, 0], points[:, 1]
    middles = (x[1:] + x[:-1]) / 2
    xs = np.concatenate([[x[0]], np.repeat(middles, 2), [x[-1]]])
    return np.column_stack([xs, np.repeat(y, 2)])
