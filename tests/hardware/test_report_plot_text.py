"""Every text of the report's plots lies wholly inside its image, wide and narrow: tick labels, axis
labels, legends, notes such as "3 not converged", and many long setup names (rotated under the box
plot). Measured on the SVG a browser is given: each <text> by matplotlib's metrics of its font (an
oracle apart from the widths the plots are laid out by), placed by its x, y, anchor and transform,
against the image's viewBox."""

from __future__ import annotations

import re
from types import SimpleNamespace
from xml.etree import ElementTree

import numpy as np
import pytest
from matplotlib.font_manager import FontProperties
from matplotlib.textpath import TextToPath
from matplotlib.transforms import Affine2D

from orchestrator.insight.compare import SeedResult, Setup
from orchestrator.insight.runs import RunView, SeedView
from orchestrator.render import report_plots
from orchestrator.render.report import COLORS as PALETTE
from orchestrator.results.run_record import EvalPoint, RunRecord

NAMES = [f"{i}-a-rather-long-setup-name-of-forty-chars"[:40] for i in range(8)]
"""Eight setups, each named in 40 characters: the box plot's names are rotated, the legends long."""
COLORS = dict(zip(NAMES, PALETTE, strict=True))


def clipped(svg: bytes) -> list[str]:
    """The texts of an SVG (its text as text) that reach outside its viewBox."""
    root = ElementTree.fromstring(svg)
    x0, y0, width, height = (float(v) for v in root.get("viewBox", "").split())
    measure = TextToPath()
    out = []
    for text in root.iter("{http://www.w3.org/2000/svg}text"):
        style = dict(item.split(": ", 1) for item in text.get("style", "").split("; "))
        size = float(style["font-size"].removesuffix("px"))
        w, h, descent = measure.get_text_width_height_descent(text.text, FontProperties(size=size), ismath=False)
        x, y = float(text.get("x", 0)), float(text.get("y", 0))
        left = x - {"start": 0, "middle": w / 2, "end": w}[style.get("text-anchor", "start")]
        corners = np.array([[left, y - h + descent], [left + w, y - h + descent], [left, y + descent],
                            [left + w, y + descent]])  # SVG's y runs down; y is the baseline
        placed = Affine2D()
        for op, args in reversed(re.findall(r"(\w+)\(([^)]*)\)", text.get("transform", ""))):
            a = [float(v) for v in args.split()]
            placed = (placed.translate(*a) if op == "translate" else
                      placed.rotate_deg_around(a[1], a[2], a[0]) if len(a) == 3 else placed.rotate_deg(a[0]))
        corners = placed.transform(corners)
        if (corners[:, 0].min() < x0 - 0.5 or corners[:, 1].min() < y0 - 0.5
                or corners[:, 0].max() > x0 + width + 0.5 or corners[:, 1].max() > y0 + height + 0.5):
            out.append(text.text or "")
    return out


def setups() -> list[Setup]:
    rng = np.random.default_rng(1)
    def seeds(i: int) -> tuple[SeedResult, ...]:
        epochs = rng.uniform(20, 40, 50)
        return tuple(SeedResult(seed=n, converged=n >= 3, epochs_to_target=e if n >= 3 else None,
                                time_to_train_ms=e * (50 + i) * 1000 if n >= 3 else None)
                     for n, e in enumerate(epochs))  # 3 not converged
    return [Setup(name=name, seeds=seeds(i)) for i, name in enumerate(NAMES)]


def views(gpus: bool) -> list[RunView]:
    t = np.arange(0, 100_000, 1000)
    def seed(i: int) -> SeedView:
        evals = tuple(EvalPoint(epoch=e, accuracy=0.5 + 0.04 * e + 0.01 * i, time_ms=e * 9000) for e in range(1, 11))
        record = RunRecord(status="converged", reason="", seed=1, run_start_ms=0, run_stop_ms=90_000,
                           time_to_train_ms=90_000, target=0.9, evals=evals)
        series = {"host": {"t_ms": t.tolist(), "cpu_pct": [99.0] * len(t), "other_cpu_pct": [1.0 + i] * len(t)},
                  "gpus": [{"power_w": (300.0 + 10 * i + 0 * t).tolist()}] if gpus else [],
                  "gpu_source": {"reason": "NVIDIA driver not loaded"}}
        return SeedView(1, record, None, None, None, own_series=(series,))  # type: ignore[arg-type]
    return [RunView(SimpleNamespace(manifest=SimpleNamespace(setup_name=name)), (seed(i),))  # type: ignore[arg-type]
            for i, name in enumerate(NAMES)]


def test_every_text_of_every_plot_lies_inside_its_image_wide_and_narrow() -> None:
    plots = report_plots.draw(setups(), views(gpus=True), COLORS)
    plots.append(report_plots.draw(setups()[:1], views(gpus=False), COLORS)[3])  # host CPU, not GPU power
    assert [p.title.split()[0] for p in plots] == ["Time-to-train", "Convergence", "Accuracy", "GPU", "Host"]
    for plot in plots:
        wide, narrow = plot.image, plot.narrow_image
        assert wide is not None and narrow is not None
        assert NAMES[-1] in wide.decode()  # whole on a desktop; on a phone, cut to what its width holds
        assert NAMES[-1] in narrow.decode() or f"{NAMES[-1][:12]}" in narrow.decode() and "\u2026" in narrow.decode()
        if plot.title.startswith("Time-to-train"):  # a phone's box plot: the count alone, the note says so
            assert "3 not converged" in wide.decode() and ">3</text>" in narrow.decode()
            assert "red at the top: the seeds that did not converge" in plot.note
        assert clipped(wide) == [] and clipped(narrow) == [], plot.title


@pytest.mark.parametrize("size", [report_plots.PLOT_SIZE, report_plots.NARROW_SIZE])
def test_the_check_sees_a_text_cut_by_the_images_edge(size) -> None:
    """The check above can fail: the same plot with its image cut short, at the left through its
    axis label and 40 px at the bottom, has that label and the turned names outside it."""
    chart = report_plots.chart(size)
    chart.boxes([[1, 2, 3]] * len(NAMES))
    chart.categories(NAMES)
    chart.y_label = "time-to-train (s)"
    whole = chart.svg()
    root = ElementTree.fromstring(whole)
    _, _, width, height = (float(v) for v in root.get("viewBox", "").split())
    label = next(text for text in root.iter("{http://www.w3.org/2000/svg}text") if text.text == "time-to-train (s)")
    at = float(label.get("x", 0))
    cut = whole.replace(f'viewBox="0 0 {width:.0f} {height:.0f}"'.encode(),
                        f'viewBox="{at:.1f} 0 {width - at:.1f} {height - 40:.0f}"'.encode())
    found = clipped(cut)
    assert "time-to-train (s)" in found and any(name.startswith(NAMES[0][:12]) for name in found)
    assert clipped(whole) == []
