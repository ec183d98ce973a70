"""A chart of one pair of axes written straight to SVG: dots, lines, box plots, reference lines, a
legend above the axes, ticks at round numbers, and every text as text (the browser sets it). The
report draws its plots with this, not with matplotlib: importing matplotlib and drawing the eight
figures took about 1.4 s of CPU, half of a report of 40 runs (2.8 to 3.4 s with it, 1.5 to 1.7 s
without), for what a few hundred lines of SVG hold.

Its margins are laid out from each label's width in the font it names first (`text_width`), so
nothing is cut by the image's edge (tests/hardware/test_report_plot_text.py measures every text);
the legend stands above the axes, where it hides no data. Units are pixels of the image."""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from orchestrator.render.text_width import ASCENT, DESCENT, text_width

FONT_FAMILY = "'DejaVu Sans', 'Bitstream Vera Sans', Arial, Helvetica, sans-serif"
INK = "#000"
GRID = "#b0b0b0"
GRID_OPACITY = 0.3
MARGIN = 0.05
"""The share of the data's span left free at each end of an axis."""
TICK = 5.0
"""Pixels a tick mark reaches out of the axes."""
DASHES = {"dashed": (6.0, 3.0), "dotted": (1.5, 2.5)}
ELLIPSIS = "\u2026"
TURNED = (30.0, 60.0, 90.0)
"""Degrees a category's name may be turned where the names do not fit side by side: the least that
leaves a line's height between one name and the next."""


@dataclass(frozen=True)
class _Dots:
    x: np.ndarray
    y: np.ndarray
    color: str
    radius: float
    label: str | None


@dataclass(frozen=True)
class _Lines:
    segments: tuple[np.ndarray, ...]
    """Each an array of (x, y) rows, drawn as one polyline."""
    color: str
    width: float
    opacity: float
    dash: str | None
    label: str | None


@dataclass(frozen=True)
class _Rule:
    """A line across the axes at one x (``vertical``) or one y."""

    at: float
    vertical: bool
    color: str
    width: float
    dash: str | None


@dataclass(frozen=True)
class _Box:
    position: float
    low: float
    q1: float
    median: float
    q3: float
    high: float


@dataclass(frozen=True)
class _Note:
    x: float
    text: str
    short: str
    """What stands for ``text`` where it is wider than a category's share of the axis."""
    color: str


@dataclass
class Chart:
    """One pair of axes of ``width`` x ``height`` pixels, its text at ``font`` pixels (``legend_font``
    for the legend's); marks are added, then `svg` lays the chart out and writes it."""

    width: float
    height: float
    font: float
    legend_font: float | None = None
    x_label: str = ""
    y_label: str = ""
    y_limits: tuple[float, float] | None = None
    """Fixed limits of the y axis; by default the data's, with a margin."""
    grid: str = "both"
    """Grid lines at the ticks of "both" axes, "y" only, or "none"."""
    legend: bool = False
    dot_sets: list[_Dots] = field(default_factory=list)
    line_sets: list[_Lines] = field(default_factory=list)
    _rules: list[_Rule] = field(default_factory=list)
    box_stats: list[_Box] = field(default_factory=list)
    _notes: list[_Note] = field(default_factory=list)
    _categories: list[str] | None = None

    def dots(self, x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray, color: str, *,
             radius: float, label: str | None = None) -> None:
        """A dot per (x, y) pair; a pair holding NaN or inf is not drawn."""
        xs, ys = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
        keep = np.isfinite(xs) & np.isfinite(ys)
        self.dot_sets.append(_Dots(xs[keep], ys[keep], color, radius, label))

    def lines(self, segments: Sequence[np.ndarray], color: str, *, width: float = 1.0, opacity: float = 1.0,
              dash: str | None = None, label: str | None = None) -> None:
        """Polylines in one style (``dash``: "dashed", "dotted" or None), named once in the legend."""
        kept = tuple(np.asarray(s, dtype=float) for s in segments if len(s))
        self.line_sets.append(_Lines(kept, color, width, opacity, dash, label))

    def rule(self, at: float, *, vertical: bool, color: str = "#444", width: float = 1.0,
             dash: str | None = None) -> None:
        """A line across the whole axes at ``at`` (an x where ``vertical``, else a y); the axis takes it in."""
        self._rules.append(_Rule(at, vertical, color, width, dash))

    def boxes(self, data: Sequence[Sequence[float]]) -> None:
        """A box plot of each of ``data`` at x = 1, 2, ...: its quartiles, its median, and whiskers to
        the furthest values within 1.5 times the box's height of it (matplotlib's `boxplot` without
        fliers). An empty one draws nothing."""
        for position, values in enumerate(data, start=1):
            array = np.asarray(values, dtype=float)
            array = array[np.isfinite(array)]
            if not len(array):
                continue
            q1, median, q3 = np.percentile(array, [25, 50, 75])
            reach = 1.5 * (q3 - q1)
            low = array[array >= q1 - reach].min()
            high = array[array <= q3 + reach].max()
            self.box_stats.append(_Box(position, float(low), float(q1), float(median), float(q3), float(high)))

    def categories(self, names: Sequence[str]) -> None:
        """The x axis names ``names`` at 1, 2, ... (its limits half a step beyond them); where one is
        wider than its share of the axis, each is turned by `TURNED` degrees, ending under its tick."""
        self._categories = list(names)

    def note_at_top(self, x: float, text: str, color: str, *, short: str = "") -> None:
        """``text`` centred at data ``x``, just inside the top of the axes; ``short`` in its place
        where it is wider than a category's share of the axis."""
        self._notes.append(_Note(x, text, short or text, color))

    def svg(self) -> bytes:
        """The chart as an SVG document."""
        return _Layout(self).svg().encode()


def nice_ticks(low: float, high: float, most: int) -> list[float]:
    """About ``most`` ticks in [low, high] (never fewer than two), at a round step (1, 2, 2.5 or 5
    times a power of ten)."""
    if not (math.isfinite(low) and math.isfinite(high)) or high <= low:
        return [low] if math.isfinite(low) else []
    for count in range(max(most, 2), max(most, 2) + 8):
        ticks = _round_ticks(low, high, count)
        if len(ticks) >= 2:
            return ticks
    return ticks


def _round_ticks(low: float, high: float, most: int) -> list[float]:
    raw = (high - low) / max(most - 1, 1)
    power = 10.0 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1.0, 2.0, 2.5, 5.0, 10.0) if m * power >= raw * (1 - 1e-9))
    first = math.ceil(low / step - 1e-9)
    decimals = max(0, 2 - math.floor(math.log10(step)))  # k * step as the round number it stands for
    ticks = [round(k * step, decimals) for k in range(first, math.floor(high / step + 1e-9) + 1)]
    return [0.0 if abs(t) < step * 1e-9 else t for t in ticks]


def tick_label(value: float, ticks: Sequence[float]) -> str:
    """A tick's number with as many decimals as its axis's step needs, the same for each tick."""
    step = abs(ticks[1] - ticks[0]) if len(ticks) > 1 else abs(value) or 1.0
    decimals = 0
    while decimals < 8 and abs(round(step, decimals) - step) > step * 1e-6:
        decimals += 1
    if max(abs(t) for t in ticks) >= 1e7 or (0 < step < 1e-5):
        return f"{value:g}"
    return f"{value:.{decimals}f}"


def fitted(text: str, size: float, room: float) -> str:
    """``text``, or as much of it as fits in ``room`` followed by an ellipsis."""
    if text_width(text, size) <= room:
        return text
    kept = text
    while kept and text_width(kept + ELLIPSIS, size) > room:
        kept = kept[:-1]
    return kept + ELLIPSIS


def _limits(parts: list[np.ndarray]) -> tuple[float, float]:
    """An axis's limits: the finite values' least and greatest, `MARGIN` of their span beyond each."""
    values = np.concatenate([np.ravel(part) for part in parts]) if parts else np.empty(0)
    values = values[np.isfinite(values)]
    if not len(values):
        return 0.0, 1.0
    low, high = float(values.min()), float(values.max())
    pad = (high - low) * MARGIN if high > low else max(abs(low) * MARGIN, 0.5)
    return low - pad, high + pad


class _Layout:
    """Where a chart's axes, ticks and labels go, and the SVG of it all."""

    def __init__(self, chart: Chart) -> None:
        self.chart = chart
        self.font = chart.font
        self.legend_font = chart.legend_font or chart.font
        self.x_range = self._x_range()
        self.y_range = chart.y_limits or _limits(self._ys())
        self.legend = self._legend_entries() if chart.legend else []
        self.names, self.turned = self._names()
        self.number_width = self._number_width()
        self._place()

    def _names(self) -> tuple[list[str], float]:
        """The categories' names as drawn, and the degrees they are turned by: side by side (0) where
        each fits its share of the axis, else turned (`TURNED`), each cut (with an ellipsis) to what
        the image holds; where even upright they would overlap, every n-th is named ('' for the others)."""
        c, f = self.chart, self.font
        if not c._categories:
            return [], 0.0
        share = 0.6 * c.width / len(c._categories)  # the axes take at least about this much of the width
        if max(text_width(name, f) for name in c._categories) <= 0.9 * share:
            return list(c._categories), 0.0
        line = (ASCENT + DESCENT) * f
        degrees = next((d for d in TURNED if share * math.sin(math.radians(d)) >= 1.1 * line), TURNED[-1])
        angle = math.radians(degrees)
        room = min(0.4 * c.height / math.sin(angle), 0.55 * c.width / max(math.cos(angle), 0.1))
        every = max(1, math.ceil(1.1 * line / (share * math.sin(angle))))
        return [fitted(name, f, room) if i % every == 0 else "" for i, name in enumerate(c._categories)], degrees

    def _number_width(self) -> float:
        """The widest label a number of the x axis may take (0 where it names categories): what a
        tick needs beside its neighbours, and how far past the axes' ends half of one may reach."""
        if self.chart._categories is not None:
            return 0.0
        probe = nice_ticks(*self.x_range, 8)
        return max((text_width(tick_label(t, probe), self.font) for t in probe), default=0.0)

    def _xs(self) -> list[np.ndarray]:
        c = self.chart
        return [*(d.x for d in c.dot_sets), *(s[:, 0] for line in c.line_sets for s in line.segments),
                np.array([r.at for r in c._rules if r.vertical] + [b.position for b in c.box_stats])]

    def _ys(self) -> list[np.ndarray]:
        c = self.chart
        return [*(d.y for d in c.dot_sets), *(s[:, 1] for line in c.line_sets for s in line.segments),
                np.array([r.at for r in c._rules if not r.vertical]),
                np.array([v for b in c.box_stats for v in (b.low, b.high)])]

    def _x_range(self) -> tuple[float, float]:
        if self.chart._categories is not None:
            return 0.5, len(self.chart._categories) + 0.5
        return _limits(self._xs())

    def _legend_entries(self) -> list[tuple[str, str, str]]:
        """(label, colour, kind) of each named mark, once per label, in the order drawn."""
        seen: dict[str, tuple[str, str, str]] = {}
        for d in self.chart.dot_sets:
            if d.label is not None:
                seen.setdefault(d.label, (d.label, d.color, "dot"))
        for line in self.chart.line_sets:
            if line.label is not None:
                seen.setdefault(line.label, (line.label, line.color, "line"))
        return list(seen.values())

    def _legend_rows(self, width: float) -> list[list[tuple[str, str, str, float]]]:
        """The legend's entries, each with its width, in rows no wider than ``width``."""
        rows: list[list[tuple[str, str, str, float]]] = [[]]
        used = 0.0
        for name, color, kind in self.legend:
            label = fitted(name, self.legend_font, width - 3.2 * self.legend_font)
            size = 2.2 * self.legend_font + text_width(label, self.legend_font) + self.legend_font
            if rows[-1] and used + size > width:
                rows.append([])
                used = 0.0
            rows[-1].append((label, color, kind, size))
            used += size
        return rows if rows[0] else []

    def _place(self) -> None:
        """The axes' box (left, top, right, bottom), from the labels around it."""
        c, f = self.chart, self.font
        pad = 0.4 * f
        line = (ASCENT + DESCENT) * f
        self.legend_rows = self._legend_rows(c.width - 2 * pad)
        top = pad + (len(self.legend_rows) * 1.4 * self.legend_font + pad if self.legend_rows else 0.0)
        bottom = c.height - pad - (line + pad if c.x_label else 0.0)
        label_side = pad + (line + pad if c.y_label else 0.0)
        right = c.width - pad
        right -= self.number_width / 2  # a tick's label may reach half its width past the axes
        left = label_side
        for _ in range(3):  # the ticks depend on the axes' size, the margins on the ticks' labels: this settles
            below, reach = self._x_tick_extent(left, right)
            axes_bottom = bottom - below - TICK - 0.3 * f
            self.y_ticks = nice_ticks(*self.y_range, self._tick_count(axes_bottom - top, 3.0 * f))
            widest = max((text_width(tick_label(t, self.y_ticks), f) for t in self.y_ticks), default=0.0)
            left = max(label_side + widest + TICK + 0.3 * f, pad + reach)
        self.y_tick_width = widest
        self.box = (left, top, right, axes_bottom)
        room = self.number_width + 1.5 * f  # what a tick of the x axis needs beside its neighbours
        self.x_ticks = [] if c._categories else nice_ticks(*self.x_range, self._tick_count(right - left, room))

    @staticmethod
    def _tick_count(length: float, room: float) -> int:
        return max(2, min(10, int(length // room) + 1))

    def _x_tick_extent(self, left: float, right: float) -> tuple[float, float]:
        """The height the x axis's tick labels take below it, and how far left of the axes' left
        edge they reach (half a number's width; a name turned to fit, its whole slant)."""
        c, f = self.chart, self.font
        line = (ASCENT + DESCENT) * f
        if c._categories is None:
            return line, self.number_width / 2
        if not self.names:
            return line, 0.0
        widths = [text_width(name, f) for name in self.names]
        step = (right - left) / len(self.names)
        if not self.turned:
            return line, max(widths[0] / 2 - step / 2, 0.0)
        angle = math.radians(self.turned)
        height = max(w * math.sin(angle) for w in widths) + line
        return height, max(max(w * math.cos(angle) - (i + 0.5) * step for i, w in enumerate(widths)), 0.0)

    # drawing

    def x_px(self, x: np.ndarray | float) -> np.ndarray | float:
        low, high = self.x_range
        left, _, right, _ = self.box
        return left + (np.asarray(x, dtype=float) - low) / (high - low) * (right - left)

    def y_px(self, y: np.ndarray | float) -> np.ndarray | float:
        low, high = self.y_range
        _, top, _, bottom = self.box
        return bottom - (np.asarray(y, dtype=float) - low) / (high - low) * (bottom - top)

    def svg(self) -> str:
        c = self.chart
        left, top, right, bottom = self.box
        out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{c.width:.0f}" height="{c.height:.0f}" '
               f'viewBox="0 0 {c.width:.0f} {c.height:.0f}" style="font-family: {html.escape(FONT_FAMILY)}">',
               f'<rect width="{c.width:.0f}" height="{c.height:.0f}" fill="#fff"/>',
               f'<defs><clipPath id="axes"><rect x="{left:.1f}" y="{top:.1f}" width="{right - left:.1f}" '
               f'height="{bottom - top:.1f}"/></clipPath></defs>']
        out += self._grid()
        out.append('<g clip-path="url(#axes)">')
        out += self._marks()
        out.append("</g>")
        out.append(f'<rect x="{left:.1f}" y="{top:.1f}" width="{right - left:.1f}" height="{bottom - top:.1f}" '
                   f'fill="none" stroke="{INK}" stroke-width="0.8"/>')
        out += self._axes_text()
        out += self._legend()
        out.append("</svg>")
        return "\n".join(out)

    def _text(self, x: float, y: float, text: str, *, anchor: str = "middle", size: float | None = None,
              rotate: float = 0.0, color: str = INK) -> str:
        size = size or self.font
        turn = f' transform="rotate({rotate:g} {x:.1f} {y:.1f})"' if rotate else ""
        fill = f' fill="{color}"' if color != INK else ""
        return (f'<text x="{x:.1f}" y="{y:.1f}" style="font-size: {size:.1f}px; text-anchor: {anchor}"{fill}{turn}>'
                f"{html.escape(text, quote=False)}</text>")

    def _grid(self) -> list[str]:
        c = self.chart
        left, top, right, bottom = self.box
        out = []
        style = f'stroke="{GRID}" stroke-opacity="{GRID_OPACITY}" stroke-width="0.8"'
        if c.grid in ("both", "y"):
            out += [f'<line x1="{left:.1f}" x2="{right:.1f}" y1="{y:.1f}" y2="{y:.1f}" {style}/>'
                    for y in (float(self.y_px(t)) for t in self.y_ticks)]
        if c.grid == "both":
            out += [f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top:.1f}" y2="{bottom:.1f}" {style}/>'
                    for x in (float(self.x_px(t)) for t in self.x_ticks)]
        return out

    def _marks(self) -> list[str]:
        c = self.chart
        left, top, right, bottom = self.box
        out = []
        for box in c.box_stats:
            out += self._box(box)
        for line in c.line_sets:
            if not line.segments:
                continue
            path = " ".join(_polyline(self.x_px(s[:, 0]), self.y_px(s[:, 1])) for s in line.segments)
            out.append(f'<path d="{path}" fill="none" stroke="{line.color}" stroke-width="{line.width:g}"'
                       f'{_opacity(line.opacity)}{_dash(line.dash)} stroke-linejoin="round"/>')
        for rule in c._rules:
            style = f'stroke="{rule.color}" stroke-width="{rule.width:g}"{_dash(rule.dash)}'
            if rule.vertical:
                x = float(self.x_px(rule.at))
                out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top:.1f}" y2="{bottom:.1f}" {style}/>')
            else:
                y = float(self.y_px(rule.at))
                out.append(f'<line x1="{left:.1f}" x2="{right:.1f}" y1="{y:.1f}" y2="{y:.1f}" {style}/>')
        for dots in c.dot_sets:
            xs, ys = self.x_px(dots.x), self.y_px(dots.y)
            out.append(f'<g fill="{dots.color}">' + "".join(
                f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{dots.radius:.1f}"/>' for x, y in zip(xs, ys, strict=True))
                + "</g>")
        return out

    def _turned_name(self, x: float, below: float, name: str) -> str:
        """A category's name turned to end under its tick at ``x``, its top ``below`` the axis: its
        baseline's end moved so that the glyphs' tops at that end stay under the tick."""
        f = self.font
        angle = math.radians(self.turned)
        # the end of the baseline, so that the corner above it (ascent up the turned glyphs) meets the tick
        end_x = x + ASCENT * f * math.sin(angle) / 2
        end_y = below + ASCENT * f * math.cos(angle)
        return self._text(end_x, end_y, name, anchor="end", rotate=-self.turned)

    def _box(self, box: _Box) -> list[str]:
        half = float(self.x_px(box.position + 0.25)) - float(self.x_px(box.position))
        x = float(self.x_px(box.position))
        low, q1, median, q3, high = (float(self.y_px(v)) for v in (box.low, box.q1, box.median, box.q3, box.high))
        ink = f'stroke="{INK}" stroke-width="1"'
        cap = half / 2
        return [
            f'<rect x="{x - half:.1f}" y="{q3:.1f}" width="{2 * half:.1f}" height="{q1 - q3:.1f}" fill="none" {ink}/>',
            f'<line x1="{x - half:.1f}" x2="{x + half:.1f}" y1="{median:.1f}" y2="{median:.1f}" '
            f'stroke="#ff7f0e" stroke-width="1.5"/>',
            f'<path d="M{x:.1f},{q1:.1f}V{low:.1f}M{x - cap:.1f},{low:.1f}H{x + cap:.1f}'
            f'M{x:.1f},{q3:.1f}V{high:.1f}M{x - cap:.1f},{high:.1f}H{x + cap:.1f}" fill="none" {ink}/>',
        ]

    def _axes_text(self) -> list[str]:
        c, f = self.chart, self.font
        left, top, right, bottom = self.box
        out = []
        ink = f'stroke="{INK}" stroke-width="0.8"'
        for t in self.y_ticks:
            y = float(self.y_px(t))
            out.append(f'<line x1="{left - TICK:.1f}" x2="{left:.1f}" y1="{y:.1f}" y2="{y:.1f}" {ink}/>')
            out.append(self._text(left - TICK - 0.3 * f, y + (ASCENT - DESCENT) / 2 * f * 0.8,
                                  tick_label(t, self.y_ticks), anchor="end"))
        below = bottom + TICK + 0.3 * f
        if c._categories is not None:
            for i, name in enumerate(self.names, start=1):
                x = float(self.x_px(i))
                out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{bottom:.1f}" y2="{bottom + TICK:.1f}" {ink}/>')
                if not name:
                    continue
                if self.turned:
                    out.append(self._turned_name(x, below, name))
                else:
                    out.append(self._text(x, below + ASCENT * f, name))
        else:
            for t in self.x_ticks:
                x = float(self.x_px(t))
                out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{bottom:.1f}" y2="{bottom + TICK:.1f}" {ink}/>')
                out.append(self._text(x, below + ASCENT * f, tick_label(t, self.x_ticks)))
        pad = 0.4 * f
        if c.x_label:
            out.append(self._text((left + right) / 2, c.height - pad - DESCENT * f, c.x_label))
        if c.y_label:  # beside the ticks' labels, along the axes (cut to their height)
            x = left - TICK - 0.3 * f - self.y_tick_width - pad - DESCENT * f
            out.append(self._text(x, (top + bottom) / 2, fitted(c.y_label, f, bottom - top), rotate=-90))
        share = (right - left) / max(len(self.names), 1)
        for note in c._notes:
            text = note.text if text_width(note.text, f) <= 0.95 * share else note.short
            half = text_width(text, f) / 2
            x = min(max(float(self.x_px(note.x)), pad + half), c.width - pad - half)
            out.append(self._text(x, top + 0.3 * f + ASCENT * f, text, color=note.color))
        return out

    def _legend(self) -> list[str]:
        f = self.legend_font
        pad = 0.4 * self.font
        out = []
        for row, entries in enumerate(self.legend_rows):
            y = pad + row * 1.4 * f + 0.7 * f
            x = self.box[0]
            for label, color, kind, size in entries:
                if kind == "dot":
                    out.append(f'<circle cx="{x + 0.9 * f:.1f}" cy="{y:.1f}" r="{0.3 * f:.1f}" fill="{color}"/>')
                else:
                    out.append(f'<line x1="{x:.1f}" x2="{x + 1.8 * f:.1f}" y1="{y:.1f}" y2="{y:.1f}" '
                               f'stroke="{color}" stroke-width="2"/>')
                out.append(self._text(x + 2.2 * f, y + (ASCENT - DESCENT) / 2 * f, label, anchor="start", size=f))
                x += size
        return out


def _polyline(xs: np.ndarray, ys: np.ndarray) -> str:
    points = [f"{x:.1f},{y:.1f}" for x, y in zip(xs, ys, strict=True)]
    return "M" + "L".join(points)


def _opacity(value: float) -> str:
    return f' stroke-opacity="{value:g}"' if value < 1 else ""


def _dash(dash: str | None) -> str:
    if dash is None:
        return ""
    on, off = DASHES[dash]
    return f' stroke-dasharray="{on:g},{off:g}"'
