"""How every command line of a workload ends: the contract's exit codes and one-line errors.

- ``Parser``: argparse whose usage errors are one line on stderr and exit 2 (argparse's own prints
  the usage block first); its subcommands' parsers are ``Parser`` too.
- ``run_main``: runs a command's body; a ``WorkloadError`` becomes its message as one line on
  stderr and its ``exit_code``, its traceback only when asked for (``MLTRAIN_DEBUG`` set, as for
  mltrain itself). Anything else is a crash and keeps Python's traceback (exit 1): the
  orchestrator reads what failed (out of memory, NCCL) from it.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Callable, Mapping
from typing import NoReturn

from workloads.common.errors import EXIT_BAD_INPUT, EXIT_INTERRUPTED, WorkloadError

DEBUG_ENV = "MLTRAIN_DEBUG"
"""Set (non-empty): a WorkloadError's traceback follows its line."""


class Parser(argparse.ArgumentParser):
    """argparse with one-line usage errors (exit 2), as the workload contract asks."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: {one_line(message)} (see --help)\n")


def one_line(message: object) -> str:
    """``message`` with every run of whitespace (newlines included) made one space."""
    return " ".join(str(message).split())


def run_main(body: Callable[[], int | None], *, prefix: str = "", interrupted: str | None = None,
             environ: Mapping[str, str] | None = None) -> int:
    """The exit code of ``body()`` (None is 0). A WorkloadError: ``prefix: message`` (or the message
    alone) as one line on stderr, then its exit code. ``interrupted``: the line to print when Ctrl-C
    stops the body (exit 130); None lets the interrupt through as Python handles it."""
    env = os.environ if environ is None else environ
    try:
        code = body()
    except WorkloadError as exc:
        sys.stdout.flush()
        sys.stderr.write(f"{prefix}: {one_line(exc)}\n" if prefix else f"{one_line(exc)}\n")
        if env.get(DEBUG_ENV):
            traceback.print_exc(file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        if interrupted is None:
            raise
        sys.stderr.write(f"{interrupted}\n")
        return EXIT_INTERRUPTED
    return 0 if code is None else code

