"""Sentences on a terminal wrap between words at its width: the terminal itself would cut a word in
two at column 80. Elsewhere (a pipe, a log) each stays one whole line."""

from __future__ import annotations

import io

from rich.console import Console

from orchestrator.output import PLAIN, Output

SENTENCE = ("mltrain on the same logs by the summarizer's rule (the 4 fastest and 4 slowest dropped, the mean of"
            " the rest; at most 4 not converged): 13.699444 min -> agrees")


def _output(terminal: bool) -> tuple[Output, io.StringIO, io.StringIO]:
    out, err = io.StringIO(), io.StringIO()
    said = Output()
    said.out = Console(file=out, width=80, force_terminal=terminal, color_system=None, **PLAIN)
    said.err = Console(file=err, width=80, force_terminal=terminal, color_system=None, **PLAIN)
    return said, out, err


def test_on_a_terminal_lines_and_warnings_wrap_between_words() -> None:
    said, out, err = _output(terminal=True)
    said.lines([SENTENCE])
    said.warning(SENTENCE)
    said.status(SENTENCE)
    words = set(SENTENCE.split()) | {"warning:"}
    for text in (out.getvalue(), err.getvalue()):
        rows = text.splitlines()
        assert len(rows) > 1 and all(len(row) <= 80 for row in rows)
        assert all(word in words for row in rows for word in row.split()), rows  # no word cut in two


def test_elsewhere_each_stays_one_line() -> None:
    said, out, err = _output(terminal=False)
    said.lines([SENTENCE])
    said.warning(SENTENCE)
    assert out.getvalue() == SENTENCE + "\n" and err.getvalue() == f"warning: {SENTENCE}\n"
