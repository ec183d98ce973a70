"""The qualification history as one self-contained HTML page: per node its verdicts, then each
metric over the nights with the bounds it was judged against (`mltrain qualify history --html`)."""

from __future__ import annotations

import io
from collections.abc import Sequence

from matplotlib.figure import Figure

from orchestrator.render.report import _table, esc, page_head
from orchestrator.render.report_plots import PNG, Plot, plot_html
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
    points = [(i, r, r.measurements()[metric]) for i, r in enumerate(records) if metric in r.measurements()]
    unit = points[-1][2].unit
    title = f"{metric} ({unit})"
    figure = Figure(figsize=(8, 3))
    axes = figure.add_subplot()
    x = [i for i, _, _ in points]
    colors = {"pass": "#2ca02c", "warn": "#ff7f0e", "fail": "#d62728"}
    axes.plot(x, [m.value for _, _, m in points], color="#1f77b4", linewidth=1, zorder=2)
    axes.scatter(x, [m.value for _, _, m in points], c=[colors.get(m.status.value, "#444") for _, _, m in points],
                 s=22, zorder=3)
    for side in ("lower", "upper"):
        bounds = [(i, getattr(m.reference, side)) for i, _, m in points
                  if m.reference is not None and getattr(m.reference, side) is not None]
        if bounds:
            bx, by = zip(*bounds, strict=True)
            axes.step(bx, by, where="mid", color="#888", linestyle="--", linewidth=0.8)
    medians = [(i, m.rolling_median) for i, _, m in points if m.rolling_median is not None]
    if medians:
        mx, my = zip(*medians, strict=True)
        axes.plot(mx, my, color="#444", linestyle=":", linewidth=0.8)
    axes.set_xticks(x, [r.started_at[5:16] for _, r, _ in points], rotation=30, fontsize=7)
    axes.set_ylabel(unit)
    axes.grid(alpha=0.3)
    sources = sorted({f"{m.reference.kind}: {m.reference.source}" for _, _, m in points if m.reference is not None})
    note = "dots: pass green, warn orange, fail red; dashed: bounds; dotted: rolling median"
    if sources:
        note += "; references: " + " | ".join(sources[-2:])
    return Plot(title=title, image=_png(figure), mime=PNG, note=note)


def _png(figure: Figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    return buffer.getvalue()
