"""The one output object of the CLI: data to stdout, status and errors to stderr.

``-q`` keeps status lines off stderr (data, warnings and errors still show); ``-v`` adds detail
lines (`Output.detail`) and a traceback for internal errors.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

from rich.console import Console
from rich.table import Table

PLAIN = {"soft_wrap": True, "highlight": False, "markup": False, "emoji": False}
"""Every console prints text as given: a path, label or reason holding ``:x:`` or ``[red]`` reads as
typed (rich would print an emoji or take it as a style). Styles come only as rich objects (`Text`)."""


class Output:
    """Commands write through this, never with ``print``."""

    def __init__(self, *, quiet: bool = False, verbose: bool = False) -> None:
        self.out = _DataConsole(file=sys.stdout, **PLAIN)
        self.err = Console(file=sys.stderr, **PLAIN)
        self.quiet = quiet
        self.verbose = verbose

    def data(self, text: str) -> None:
        """Plain data to stdout (no markup interpretation)."""
        self._to_stdout(lambda: self.out.print(text))

    def json(self, value: Any) -> None:
        """A document (indented), or a list one item per line: a listing of thousands of runs is
        written by the C encoder (an indented dump goes through the slow pure-Python one) and still
        reads, and greps, line by line."""
        if isinstance(value, list) and value:
            encode = json.JSONEncoder(sort_keys=True, default=str).encode  # one encoder for every item
            items = map(encode, value)
            text = "[\n" + ",\n".join(items) + "\n]\n"
        else:
            text = json.dumps(value, indent=2, sort_keys=True, default=str) + "\n"
        self._to_stdout(lambda: (sys.stdout.write(text), sys.stdout.flush()))

    def prose(self, text: str) -> None:
        """A sentence to stdout, wrapped at the terminal's width."""
        self._to_stdout(lambda: self.out.print(text, soft_wrap=False))

    def table(self, table: Table, *, width: int | None = None) -> None:
        """A table at the terminal's width, or at ``width`` where that is wider (a --wide table)."""
        console = self.out
        if width is not None and width > console.width:
            console = _DataConsole(file=sys.stdout, **PLAIN, width=width)
        self._to_stdout(lambda: console.print(table))

    def _to_stdout(self, write: Callable[[], object]) -> None:
        with stdout_reader_may_leave():
            write()

    def lines(self, lines: list[str]) -> None:
        """Sentences to stdout: on a terminal wrapped between words at its width (the terminal itself
        would cut a word in two), elsewhere each a whole line."""
        for line in lines:
            self._to_stdout(lambda line=line: self.out.print(line, soft_wrap=not self.out.is_terminal))

    def status(self, text: str) -> None:
        if not self.quiet:
            self._say(text)

    def detail(self, text: str) -> None:
        """Only with -v: what a person debugging a run wants to see."""
        if self.verbose:
            self._say(text, style="dim")

    def warning(self, text: str) -> None:
        self._say(f"warning: {text}", style="yellow")

    def error(self, text: str) -> None:
        self._say(f"error: {text}", style="bold red")

    def _say(self, text: str, style: str | None = None) -> None:
        """A line to stderr: on a terminal wrapped between words, elsewhere whole (a log greps by line)."""
        self.err.print(text, style=style, soft_wrap=not self.err.is_terminal)

    def explain(self, text: str) -> None:
        """The lines after an error that say how to put it right, indented under it (the error stays
        the one line that starts with ``error:``)."""
        self.err.print("\n".join(f"  {line}".rstrip() for line in text.rstrip().splitlines()), markup=False)


class _DataConsole(Console):
    """stdout's console: a reader that leaves ends the printing, not the command (rich's own
    default exits 1, which would report a valid result as invalid)."""

    def on_broken_pipe(self) -> None:
        _stdout_to_devnull()


@contextlib.contextmanager
def stdout_reader_may_leave() -> Iterator[None]:
    """A reader that stops reading (``mltrain show RUN | head -1``) ends what is printed, not the
    command: stdout is pointed at /dev/null, so that nothing more is written there (the interpreter's
    own flush at exit included), and the command ends with the exit code its work earned."""
    try:
        yield
    except BrokenPipeError:
        _stdout_to_devnull()


def _stdout_to_devnull() -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    finally:
        os.close(devnull)


def stdout_is_closed() -> bool:
    """The process was started with its standard output closed (``>&-``): nothing it prints can be read."""
    if sys.stdout is None:
        return True
    try:
        fd = sys.stdout.fileno()
    except (OSError, ValueError):  # an in-memory stream (a test's capture) is not a closed descriptor
        return False
    try:
        os.fstat(fd)
    except OSError:
        return True
    return False


def tolerate_narrow_encodings() -> None:
    """A terminal or pipe in a narrow encoding (LANG=C without Python's UTF-8 mode, PYTHONIOENCODING=
    ascii) still gets every line: a character it cannot hold is written as an escape (\\u2713)
    instead of ending the command."""
    for stream in (sys.stdout, sys.stderr):
        encoding = getattr(stream, "encoding", None) or "utf-8"
        try:
            "\u2026\u2713\u00e9".encode(encoding)
        except (UnicodeEncodeError, LookupError):
            reconfigure = getattr(stream, "reconfigure", None)
            if reconfigure is not None:
                reconfigure(errors="backslashreplace")
