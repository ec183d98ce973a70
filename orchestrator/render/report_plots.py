"""The report's plots, drawn as SVG (`svg_chart`: text stays text, the browser sets it) and embedded
as data URIs, so the page can be mailed or archived alone and its plots stay crisp at any zoom. Each
plot is drawn twice: wide for a desktop, and narrow with larger type for a phone (the page picks one
by its width), so that its labels stay readable at 390 px. A plot of lines (accuracy, power, CPU)
draws one path per setup and style (`_add_lines`), not one element per seed, each line no finer than
the pixels it is drawn on (`decimate`: hours of 1 Hz telemetry are thousands of points a line). What
a plot shows is gathered once and drawn at both sizes.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from orchestrator.insight import compare as comparing
from orchestrator.insight.runs import RunView
from orchestrator.render.svg_chart import Chart

SVG = "image/svg+xml"


@dataclass(frozen=True, kw_only=True)
class Plot:
    """One embedded figure."""

    title: str
    image: bytes | None
    """None when there was nothing to draw."""
    narrow_image: bytes | None = None
    """The same, drawn for a phone's width."""
    note: str = ""
    """Why nothing was drawn, or how to read it."""


def plot_html(plot: Plot) -> str:
    """A plot's heading, its image (the narrow one on a phone) and its note."""
    esc = html.escape
    parts = [f"<h3>{esc(plot.title)}</h3>"]
    if plot.image is not None:
        data = base64.b64encode(plot.image).decode("ascii")
        image = f'<img alt="{esc(plot.title)}" src="data:{SVG};base64,{data}">'
        if plot.narrow_image is not None:
            narrow = base64.b64encode(plot.narrow_image).decode("ascii")
            image = (f'<picture><source media="{NARROW_SCREEN}" srcset="data:{SVG};base64,{narrow}">'
                     f"{image}</picture>")
        parts.append(image)
    if plot.note:
        parts.append(f'<p class="note">{esc(plot.note)}</p>')
    return "\n".join(parts)


Size = tuple[float, float]
PLOT_DPI = 110
"""Pixels an inch of a plot's size: its type, 10 points, is 15 px."""
PLOT_SIZE: Size = (12.0, 4.8)
"""Inches at `PLOT_DPI`: 1,320 x 528 px, the page's width (the image is scaled to it, never wider)."""
FONT = 10.0
"""Points of a plot's type."""
NARROW_SIZE: Size = (5.0, 4.2)
"""A phone's plot: 550 px wide, shown at about 340 px."""
NARROW_FONT = 14.0
"""Points of a phone plot's type: about 12 px once the image is scaled to the screen."""
NARROW_LEGEND_FONT = NARROW_FONT * 0.85
"""Points of a phone plot's legend: a little smaller, its names many to a row."""
NARROW_SCREEN = "(max-width: 700px)"
DOT = 0.21
"""A dot's radius, in ems of the chart's type."""
MAX_POINTS = 400
"""Dots a scatter plot draws per setup: a setup of more seeds is drawn by this many, spread evenly
over its sorted values (its least and greatest among them), so that a report of thousands of runs
draws in a blink (drawing all of 2 x 15,000 seeds took seconds); the boxes count every seed."""


def spread(values: Sequence, limit: int = MAX_POINTS) -> np.ndarray:
    """``values`` (numbers, or rows of numbers: ordered by their first, then their second) sorted, or,
    where there are more than ``limit``, ``limit`` of them at evenly spaced ranks, the first and last
    included. Sorted by numpy: ``sorted`` of 15,000 rows took 20 ms, a fifth of a scatter plot."""
    array = np.asarray(values, dtype=float)
    order = np.lexsort(array.T[::-1]) if array.ndim == 2 else np.argsort(array, kind="stable")
    if len(order) > limit:
        order = order[np.linspace(0, len(order) - 1, limit).round().astype(np.int64)]
    return array[order]


def _drawn_note(counts: Sequence[int]) -> str:
    """What a plot says where a setup's dots are a spread of its seeds, not each of them."""
    if all(count <= MAX_POINTS for count in counts):
        return ""
    return f" (a setup of more than {MAX_POINTS} seeds: {MAX_POINTS} dots at evenly spaced ranks of its values)"


def draw(setups: Sequence[comparing.Setup], runs: Sequence[RunView], colors: dict[str, str]) -> list[Plot]:
    """The report's plots, each wide and narrow: what a plot shows is gathered once, drawn at both sizes."""
    return [ttt_plot(setups, colors, narrow=NARROW_SIZE), split_plot(setups, colors, narrow=NARROW_SIZE),
            accuracy_plot(runs, colors, narrow=NARROW_SIZE), power_plot(runs, colors, narrow=NARROW_SIZE)]


def chart(size: Size = PLOT_SIZE, font: float = FONT, legend_font: float | None = None, **settings: Any) -> Chart:
    """An empty chart of ``size`` inches with its type at ``font`` points (its legend's at
    ``legend_font``, by default the same)."""
    def px(inches: float) -> float:
        return inches * PLOT_DPI
    return Chart(width=px(size[0]), height=px(size[1]), font=px(font / 72),
                 legend_font=px((legend_font or font) / 72), **settings)


def _drawn(paint: Callable[[Chart], object], size: Size, narrow: Size | None) -> tuple[bytes, bytes | None]:
    """What ``paint`` draws on a chart of ``size``, as SVG; and where ``narrow`` is given, on a chart
    of that size with a phone's type (`NARROW_FONT`)."""
    def svg(drawn: Chart) -> bytes:
        paint(drawn)
        return drawn.svg()

    return svg(chart(size)), None if narrow is None else svg(chart(narrow, NARROW_FONT, NARROW_LEGEND_FONT))


def ttt_plot(setups: Sequence[comparing.Setup], colors: dict[str, str], size: Size = PLOT_SIZE,
             narrow: Size | None = None) -> Plot:
    title = "Time-to-train per seed, by setup"
    data = [setup.values("time_to_train_s") for setup in setups]  # (found once: the comparison asked for them)
    if not any(len(values) for values in data):
        return Plot(title=title, image=None, note="no converged run to plot")
    dots = [values if len(values) <= MAX_POINTS else spread(values) for values in data]
    failing = any(len(setup.seeds) > len(values) for setup, values in zip(setups, data, strict=True))

    def paint(chart: Chart) -> None:
        chart.boxes(data)
        jitter = np.random.default_rng(0)
        for index, (setup, values, shown) in enumerate(zip(setups, data, dots, strict=True), start=1):
            chart.dots(index + jitter.uniform(-0.15, 0.15, len(shown)), shown, colors[setup.name],
                       radius=DOT * chart.font)
            failed = len(setup.seeds) - len(values)
            if failed:
                chart.note_at_top(index, f"{failed} not converged", "#b00", short=str(failed))
        chart.categories([s.name for s in setups])
        chart.y_label, chart.grid = "time-to-train (s)", "y"

    image, narrow_image = _drawn(paint, size, narrow)
    return Plot(title=title, image=image, narrow_image=narrow_image,
                note="box: quartiles of converged runs; dots: one per seed"
                + ("; red at the top: the seeds that did not converge" if failing else "")
                + _drawn_note([len(d) for d in data]))


def split_plot(setups: Sequence[comparing.Setup], colors: dict[str, str], size: Size = PLOT_SIZE,
               narrow: Size | None = None) -> Plot:
    title = "Convergence versus hardware: epochs-to-target against seconds per epoch"
    counts = []
    shown: list[tuple[str, np.ndarray]] = []
    for setup in setups:
        # the converged seeds with epochs-to-target, each once in both, in the same order: a seed's
        # seconds per epoch is known exactly where its epochs are (`SeedResult`)
        points = np.column_stack([setup.values("seconds_per_epoch"), setup.values("epochs_to_target")])
        counts.append(len(points))
        if len(points):
            shown.append((setup.name, points if len(points) <= MAX_POINTS else spread(points)))
    if not shown:
        return Plot(title=title, image=None, note="no run logged epochs-to-target")

    def paint(chart: Chart) -> None:
        for name, xy in shown:
            chart.dots(xy[:, 0], xy[:, 1], colors[name], radius=DOT * chart.font, label=name)
        chart.x_label, chart.y_label = "seconds per epoch (hardware)", "epochs-to-target (convergence)"
        chart.legend = True

    image, narrow_image = _drawn(paint, size, narrow)
    return Plot(title=title, image=image, narrow_image=narrow_image,
                note="setups that differ left-right differ in hardware speed; up-down spread is convergence luck"
                + _drawn_note(counts))


def accuracy_plot(runs: Sequence[RunView], colors: dict[str, str], size: Size = PLOT_SIZE,
                  narrow: Size | None = None) -> Plot:
    title = "Accuracy versus time since run_start"
    lines: dict[str, list[np.ndarray]] = {}
    targets = set()
    for view in runs:
        for seed in view.seeds:
            evals = seed.record.evals
            if not evals:
                continue
            lines.setdefault(view.setup_name, []).append(
                np.array([(e.time_ms / 1000, e.accuracy) for e in evals], dtype=float))
            if seed.record.target is not None:
                targets.add(seed.record.target)
    if not lines:
        return Plot(title=title, image=None, note="no run logged an evaluation")

    def paint(chart: Chart) -> None:
        _add_lines(chart, lines, colors, opacity=0.6, width=1)
        for target in sorted(targets):
            chart.rule(target, vertical=False, width=0.8, dash="dashed")
        chart.x_label, chart.y_label, chart.legend = "seconds since run_start", "eval accuracy", True

    image, narrow_image = _drawn(paint, size, narrow)
    return Plot(title=title, image=image, narrow_image=narrow_image, note="one line per seed; dashed: quality target")


def power_plot(runs: Sequence[RunView], colors: dict[str, str], size: Size = PLOT_SIZE,
               narrow: Size | None = None) -> Plot:
    title = "GPU power over time (all GPUs of a seed summed)"
    lines: dict[str, list[np.ndarray]] = {}
    reasons: set[str] = set()
    drawn = [(view.setup_name, series, seed.record.run_start_ms) for view in runs for seed in view.seeds
             for series in seed.own_series if seed.record.run_start_ms is not None]
    for name, series, start in drawn:
        gpus = series.get("gpus") or []
        if not gpus:
            reasons.add(str((series.get("gpu_source") or {}).get("reason", "no GPU in the series")))
            continue
        t = (np.asarray(series["host"]["t_ms"], dtype=float) - start) / 1000
        power = np.sum([[np.nan if v is None else v for v in g["power_w"]] for g in gpus], axis=0)
        lines.setdefault(name, []).append(np.column_stack([t, power]))
    if not lines:
        why = "; ".join(sorted(reasons)) or "no telemetry was recorded"
        if reasons:
            return cpu_plot(runs, colors, f"no GPU power to plot: {why}", size, narrow)
        return Plot(title=title, image=None, note=f"no GPU power to plot: {why}")

    def paint(chart: Chart) -> None:
        _add_lines(chart, lines, colors, opacity=0.6, width=1)
        chart.rule(0, vertical=True, width=0.8, dash="dotted")
        chart.x_label, chart.y_label, chart.legend = "seconds since run_start", "power (W)", True

    image, narrow_image = _drawn(paint, size, narrow)
    return Plot(title=title, image=image, narrow_image=narrow_image, note="dotted: run_start" + _per_node(runs))


def cpu_plot(runs: Sequence[RunView], colors: dict[str, str], why: str, size: Size = PLOT_SIZE,
             narrow: Size | None = None) -> Plot:
    """What a CPU-only host shows in place of GPU power: the share of the host's CPU that processes
    other than the seed's used (solid: what disturbs a result), beside all of the CPU busy (faint: a
    training seed keeps it near 100% whether or not anything else ran). A series of an older mltrain,
    without the others' share, shows the CPU busy alone."""
    seeds = [(view.setup_name, series["host"], seed.record.run_start_ms) for view in runs for seed in view.seeds
             for series in seed.own_series if seed.record.run_start_ms is not None]
    with_others = any(host.get("other_cpu_pct") for _, host, _ in seeds)
    title = "Host CPU: other processes' share over time" if with_others else "Host CPU busy over time"
    solid: dict[str, list[np.ndarray]] = {}  # each setup's, in the order of its first seed
    faint: dict[str, list[np.ndarray]] = {}
    alone: dict[str, list[np.ndarray]] = {}
    for name, host, start in seeds:
        t = (np.asarray(host["t_ms"], dtype=float) - start) / 1000
        busy, others = _values(host.get("cpu_pct"), len(t)), _values(host.get("other_cpu_pct"), len(t))
        solid.setdefault(name, [])
        if with_others and others is not None:
            solid[name].append(np.column_stack([t, others]))
            if busy is not None:
                faint.setdefault(name, []).append(np.column_stack([t, busy]))
        elif busy is not None:
            alone.setdefault(name, []).append(np.column_stack([t, busy]))
    if not solid:
        return Plot(title=title, image=None, note=why)

    def paint(chart: Chart) -> None:
        labels = _add_lines(chart, solid, colors, opacity=0.8, width=1.5)
        _add_lines(chart, faint, colors, opacity=0.3, width=0.8, dash="dotted", labelled=set(solid))
        _add_lines(chart, alone, colors, opacity=0.6, width=1, labelled=labels)
        chart.rule(0, vertical=True, width=0.8, dash="dotted")
        chart.x_label, chart.y_label, chart.y_limits, chart.legend = "seconds since run_start", "% of all CPUs", \
            (0.0, 105.0), True

    how = ("solid: other processes' share of the host's CPU (what disturbs a result); faint dotted: all of the"
           " CPU busy, the seed's own included" if with_others
           else "CPU busy, the seed's own included (this mltrain did not record other processes' share)")
    image, narrow_image = _drawn(paint, size, narrow)
    return Plot(title=title, image=image, narrow_image=narrow_image,
                note=f"{why}; {how}; dotted line: run_start" + _per_node(runs))


def _per_node(runs: Sequence[RunView]) -> str:
    """What a plot says where a seed's nodes sampled themselves: each node is a line of its own."""
    nodes = any(seed.across_nodes for view in runs for seed in view.seeds)
    return "; a seed across nodes: a line per node, each from the node's own series" if nodes else ""


def _add_lines(chart: Chart, lines: dict[str, list[np.ndarray]], colors: dict[str, str], *,
               labelled: set[str] | None = None, **style: Any) -> set[str]:
    """Each setup's lines (arrays of (x, y) rows) as one path in its colour, named in the legend
    unless it is in ``labelled``; a line is broken where a value is missing (NaN), as matplotlib's
    `plot` breaks it. The setups it named."""
    named: set[str] = set()
    columns = round(chart.width)
    known = [xy[:, 0][~np.isnan(xy[:, 0])] for arrays in lines.values() for xy in arrays]
    known = [x for x in known if len(x)]
    span = (min(x.min() for x in known), max(x.max() for x in known)) if known else (0.0, 1.0)
    for name, arrays in lines.items():
        segments = [decimate(piece, columns, span) for xy in arrays for piece in _unbroken(xy)]
        if not segments:
            continue
        label = None if labelled is not None and name in labelled else name
        chart.lines(segments, colors[name], label=label, **style)
        named.add(name)
    return named


def decimate(xy: np.ndarray, columns: int, span: tuple[float, float]) -> np.ndarray:
    """A line (rows of (x, y), x rising) no finer than the ``columns`` pixel columns its axis's ``span``
    of x is drawn on: in each column its first, least, greatest and last point, in their order, so that
    a peak one sample wide is still drawn, and where it enters and leaves each column. A line of a few
    points a column, or whose x does not rise, is kept whole."""
    x = xy[:, 0]
    if len(xy) <= 4 * columns or np.any(np.diff(x) < 0):
        return xy
    low, high = span
    column = np.clip(((x - low) / ((high - low) or 1.0) * columns).astype(np.int64), 0, columns - 1)
    first = np.flatnonzero(np.concatenate([[True], column[1:] != column[:-1]]))
    last = np.concatenate([first[1:], [len(x)]]) - 1
    by_value = np.lexsort((xy[:, 1], column))  # within each column (in x order), least y first
    return xy[np.unique(np.concatenate([first, last, by_value[first], by_value[last]]))]


def _unbroken(xy: np.ndarray) -> list[np.ndarray]:
    """The stretches of a line between its missing points."""
    known = ~np.isnan(xy).any(axis=1)
    if known.all():
        return [xy] if len(xy) else []
    edges = np.flatnonzero(np.diff(np.concatenate([[0], known.astype(np.int8), [0]])))
    return [xy[start:stop] for start, stop in zip(edges[::2], edges[1::2], strict=True)]


def _values(column: list[float | None] | None, length: int) -> np.ndarray | None:
    """A recorded column as floats (None as NaN); None where it is absent or of another length."""
    if not column or len(column) != length:
        return None
    return np.array([np.nan if v is None else v for v in column], dtype=float)
