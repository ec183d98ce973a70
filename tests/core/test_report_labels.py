"""A label is text wherever it goes: `$...$` in a label or title does not break the report's plots."""

from __future__ import annotations

import base64
import html
from pathlib import Path

from tests.hardware.stored_runs import make_run


def test_dollar_signs_in_labels_and_title_are_text(cli, tmp_path: Path):
    results = tmp_path / "results"
    cheap = make_run(results, label="a100 at $2/h and $3/h", seeds=[1, 2, 3])
    odd = make_run(results, label="$x^$ and $\\nosuchcommand$", seeds=[4, 5, 6])  # mathtext that cannot render
    out = tmp_path / "r.html"
    r = cli("report", cheap, odd, "--out", str(out), "--title", "cost in $ per $h$", "--results", str(results))
    assert r.code == 0, r.err
    text = out.read_text()
    assert html.escape("a100 at $2/h and $3/h") in text and html.escape("$x^$ and $\\nosuchcommand$") in text
    assert text.count("data:image/svg+xml;base64,") >= 2  # the plots that carry the labels were drawn
    drawn = "".join(base64.b64decode(image.split('"', 1)[0]).decode() for image in text.split("svg+xml;base64,")[1:])
    assert html.escape("$x^$ and $\\nosuchcommand$", quote=False) in drawn  # in a plot as its text, not mathtext
