"""The report's chart (`orchestrator.render.svg_chart`) against matplotlib as an oracle: its text
widths are the font's own, its box plots are matplotlib's `boxplot` statistics, its ticks round
numbers inside the axis, and what it is given to draw is drawn, escaped, or left out when not finite."""

from __future__ import annotations

import math
from xml.etree import ElementTree

import numpy as np
import pytest
from matplotlib import cbook
from matplotlib.font_manager import FontProperties, findfont
from matplotlib.ft2font import FT2Font, LoadFlags
from matplotlib.textpath import TextToPath

from orchestrator.render.svg_chart import Chart, fitted, nice_ticks, tick_label
from orchestrator.render.text_width import ADVANCES, text_width

SVG = "{http://www.w3.org/2000/svg}"


def test_the_advance_widths_are_those_of_the_font_matplotlib_ships() -> None:
    font = FT2Font(findfont(FontProperties(family="DejaVu Sans")))
    font.set_size(1000, 72)
    own = [round(font.load_char(code, flags=LoadFlags.NO_HINTING).linearHoriAdvance / 65536) for code in range(32, 127)]
    assert list(ADVANCES) == own
    measure = TextToPath()
    for text in ("time-to-train (s)", "0-a-rather-long-setup-name-of-forty-char", "GPU power (W) 1,234.5"):
        width, _, _ = measure.get_text_width_height_descent(text, FontProperties(size=15.3), ismath=False)
        assert text_width(text, 15.3) == pytest.approx(width, rel=0.01)


def test_a_cut_text_fits_its_room_and_ends_in_an_ellipsis() -> None:
    name = "a-rather-long-setup-name-of-forty-chars"
    assert fitted(name, 15.0, 1e4) == name
    cut = fitted(name, 15.0, 120.0)
    assert cut.endswith("\u2026") and name.startswith(cut[:-1]) and text_width(cut, 15.0) <= 120.0
    assert text_width(cut[:-1] + name[len(cut) - 1] + "\u2026", 15.0) > 120.0  # the most that fits


def test_boxes_are_matplotlibs_boxplot_statistics() -> None:
    rng = np.random.default_rng(7)
    data = [rng.normal(100, 10, 50), np.append(rng.normal(5, 1, 30), [40.0, -30.0]), [3.0], [1.0, 2.0]]
    chart = Chart(width=600, height=400, font=15)
    chart.boxes(data)
    for box, stats in zip(chart.box_stats, cbook.boxplot_stats(data, whis=1.5), strict=True):
        assert (box.low, box.q1, box.median, box.q3, box.high) == pytest.approx(
            (stats["whislo"], stats["q1"], stats["med"], stats["q3"], stats["whishi"]))


@pytest.mark.parametrize(("low", "high", "most"), [(0.6, 0.95, 2), (0, 105, 9), (1000, 2200, 9), (-5, 1e6, 6),
                                                   (1e-4, 3e-4, 5), (49.6, 57.4, 8), (-0.3, 0.3, 4)])
def test_ticks_are_round_steps_inside_the_axis_each_labelled_apart(low: float, high: float, most: int) -> None:
    ticks = nice_ticks(low, high, most)
    assert len(ticks) >= 2 and all(low <= t <= high for t in ticks)
    steps = np.diff(ticks)
    assert np.allclose(steps, steps[0])
    mantissa = steps[0] / 10 ** math.floor(math.log10(steps[0]))
    assert any(math.isclose(mantissa, m) for m in (1, 2, 2.5, 5))
    labels = [tick_label(t, ticks) for t in ticks]
    assert len(set(labels)) == len(labels) and "-0" not in labels
    assert all(float(label) == pytest.approx(t, abs=steps[0] * 1e-6) for label, t in zip(labels, ticks, strict=True))


def test_what_is_drawn_is_escaped_and_a_point_that_is_not_finite_is_left_out() -> None:
    chart = Chart(width=600, height=400, font=15, legend=True, x_label="x <b>", y_label="y & z")
    chart.dots([1.0, 2.0, np.nan, 4.0], [1.0, np.inf, 3.0, 4.0], "#f00", radius=3, label="<script>")
    chart.lines([np.array([[0.0, 0.0], [5.0, 5.0]])], "#00f", label="line")
    root = ElementTree.fromstring(chart.svg())
    assert len(list(root.iter(f"{SVG}circle"))) == 2 + 1  # two finite dots and the legend's
    texts = [text.text for text in root.iter(f"{SVG}text")]
    assert {"<script>", "line", "x <b>", "y & z"} <= set(texts)  # parsed back: each was text, not markup
    assert not list(root.iter(f"{SVG}script"))


def test_names_too_many_to_stand_side_by_side_are_turned_and_every_nth_named() -> None:
    """A year of nightly qualifications on one axis: each night has its tick, and the names drawn,
    upright and a line's height apart or more, are the first and every n-th after it."""
    names = [f"night-{n:03d}" for n in range(365)]
    chart = Chart(width=880, height=330, font=15.3)
    chart.dots(np.arange(1, 366), np.arange(365), "#000", radius=2)
    chart.categories(names)
    root = ElementTree.fromstring(chart.svg())
    shown = [(text.text, float(text.get("x", 0))) for text in root.iter(f"{SVG}text") if text.text in names]
    assert 2 < len(shown) < 365 and shown[0][0] == names[0]
    every = names.index(shown[1][0])
    assert [name for name, _ in shown] == names[::every]
    assert min(np.diff([x for _, x in shown])) >= 1.1 * 15.3  # a line's height (its ascent and descent) apart
    assert all("rotate(-90" in text.get("transform", "") for text in root.iter(f"{SVG}text") if text.text in names)


def test_a_bound_is_drawn_in_steps_as_matplotlibs_mid_steps() -> None:
    from orchestrator.render.qualification_report import _steps

    x, y = np.array([1.0, 2.0, 4.0, 5.0]), np.array([10.0, 12.0, 11.0, 15.0])
    expected = cbook.pts_to_midstep(x, y)
    assert np.array_equal(_steps(np.column_stack([x, y])), np.column_stack(expected))
