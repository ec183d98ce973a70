"""How wide a line of text is set in DejaVu Sans (the font a chart names first, `svg_chart`), from the
font's own advance widths: what a chart lays its margins out by, so that no label is cut by the
image's edge. A browser without that font sets the text in a narrower sans-serif (Arial, Helvetica),
so the width measured here is the most it takes. tests/hardware/test_svg_chart.py holds the table
equal to the widths matplotlib reads from the font file it ships."""

from __future__ import annotations

ADVANCES = (
    318, 401, 460, 838, 636, 950, 780, 275, 390, 390, 500, 838, 318, 361, 318, 337,  # space to /
    636, 636, 636, 636, 636, 636, 636, 636, 636, 636, 337, 337, 838, 838, 838, 531,  # 0 to ?
    1000, 684, 686, 698, 770, 632, 575, 775, 752, 295, 295, 656, 557, 863, 748, 787,  # @ to O
    603, 787, 695, 635, 611, 732, 684, 989, 685, 611, 685, 390, 337, 390, 838, 500,  # P to _
    500, 613, 635, 550, 635, 615, 352, 635, 634, 278, 278, 579, 278, 974, 634, 612,  # ` to o
    635, 635, 411, 521, 392, 634, 592, 818, 592, 592, 525, 636, 337, 636, 838,  # p to ~
)
"""Advance widths of the printable ASCII characters (space to tilde), in thousandths of an em."""
WIDEST = 1000
"""What any other character is taken to be: as wide as an em, the most a Latin letter takes."""
ASCENT = 0.928
"""How far the font's tallest glyph reaches above the baseline, in ems (its ascender)."""
DESCENT = 0.236
"""How far below it the lowest reaches."""


def text_width(text: str, size: float) -> float:
    """The width of ``text`` set in one line at ``size`` (the font's size, in the chart's units)."""
    return size * sum(ADVANCES[code - 32] if 32 <= (code := ord(char)) < 127 else WIDEST for char in text) / 1000
