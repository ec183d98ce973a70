"""The one output object of the CLI: data to stdout, status and errors to stderr."""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console
from rich.table import Table


class Output:
    """Commands write through this, never with ``print``."""

    def __init__(self, *, quiet: bool = False) -> None:
        self.out = Console(file=sys.stdout, soft_wrap=True, highlight=False)
        self.err = Console(file=sys.stderr, soft_wrap=True, highlight=False)
        self.quiet = quiet

    def data(self, text: str) -> None:
        """Plain data to stdout (no markup interpretation)."""
        self.out.print(text, markup=False)

    def json(self, value: Any) -> None:
        sys.stdout.write(json.dumps(value, indent=2, sort_keys=True, default=str) + "\n")
        sys.stdout.flush()

    def table(self, table: Table) -> None:
        self.out.print(table)

    def lines(self, lines: list[str]) -> None:
        for line in lines:
            self.data(line)

    def status(self, text: str) -> None:
        if not self.quiet:
            self.err.print(text, markup=False)

    def warning(self, text: str) -> None:
        self.err.print(f"warning: {text}", markup=False, style="yellow")

    def error(self, text: str) -> None:
        self.err.print(f"error: {text}", markup=False, style="bold red")
