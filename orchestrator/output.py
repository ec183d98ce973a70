"""The one output object of the CLI: data to stdout, status and errors to stderr.

``-q`` keeps status lines off stderr (data, warnings and errors still show); ``-v`` adds detail
lines (`Output.detail`) and a traceback for internal errors.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console
from rich.table import Table


class Output:
    """Commands write through this, never with ``print``."""

    def __init__(self, *, quiet: bool = False, verbose: bool = False) -> None:
        self.out = Console(file=sys.stdout, soft_wrap=True, highlight=False)
        self.err = Console(file=sys.stderr, soft_wrap=True, highlight=False)
        self.quiet = quiet
        self.verbose = verbose

    def data(self, text: str) -> None:
        """Plain data to stdout (no markup interpretation)."""
        self.out.print(text, markup=False)

    def json(self, value: Any) -> None:
        sys.stdout.write(json.dumps(value, indent=2, sort_keys=True, default=str) + "\n")
        sys.stdout.flush()

    def prose(self, text: str) -> None:
        """A sentence to stdout, wrapped at the terminal's width."""
        self.out.print(text, markup=False, soft_wrap=False)

    def table(self, table: Table) -> None:
        self.out.print(table)

    def lines(self, lines: list[str]) -> None:
        for line in lines:
            self.data(line)

    def status(self, text: str) -> None:
        if not self.quiet:
            self.err.print(text, markup=False)

    def detail(self, text: str) -> None:
        """Only with -v: what a person debugging a run wants to see."""
        if self.verbose:
            self.err.print(text, markup=False, style="dim")

    def warning(self, text: str) -> None:
        self.err.print(f"warning: {text}", markup=False, style="yellow")

    def error(self, text: str) -> None:
        self.err.print(f"error: {text}", markup=False, style="bold red")
