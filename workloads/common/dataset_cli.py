"""What the dataset command lines of the workloads whose data has no raw form share (resnet50's
ImageNet, llama31_8b's preprocessed C4): `check DIR`, `prepare SRC --cache DIR` (SRC itself once it
passes the check: nothing is made from raw data), `how-to-get`, and `main`. Each workload adds its
own `synthesize` (and more) to the same parser, and names its check."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from workloads.common.cli import run_main

Commands = Any
"""argparse's subparsers action (its type is private)."""


def say(message: str) -> None:
    """A dataset command line's only way to talk: one line on stdout."""
    sys.stdout.write(message + "\n")


def add_check_and_prepare(commands: Commands, check_ready: Callable[[Path], str]) -> None:
    """`check DIR` (``check_ready``'s line on stdout) and the contract's `prepare SRC --cache DIR`: a
    folder that passes the check is its own training-ready folder (printed on stdout, alone, the
    check's line on stderr); any other is refused with the check's error."""

    def check(args: argparse.Namespace) -> None:
        say(check_ready(args.dir))

    def prepare(args: argparse.Namespace) -> None:
        sys.stderr.write(check_ready(args.src) + "\n")
        sys.stdout.write(f"{args.src}\n")

    checking = commands.add_parser("check", help="fast check that DIR is training-ready")
    checking.add_argument("dir", type=Path)
    checking.set_defaults(run=check)
    preparing = commands.add_parser("prepare", help="print the training-ready folder for SRC (SRC itself when ready)")
    preparing.add_argument("src", type=Path)
    preparing.add_argument("--cache", type=Path, required=True, help="unused: nothing is made from raw data")
    preparing.set_defaults(run=prepare)


def add_how_to_get(commands: Commands, text: str, *, help: str) -> None:
    """`how-to-get`: ``text`` on stdout."""
    def how_to_get(_: argparse.Namespace) -> None:
        sys.stdout.write(text)

    how = commands.add_parser("how-to-get", help=help)
    how.set_defaults(run=how_to_get)


def main(parser: Callable[[], argparse.ArgumentParser], argv: list[str] | None = None) -> int:
    """Parse ``argv`` with ``parser()`` and run the chosen command under the contract's exit codes."""
    args = parser().parse_args(argv)
    return run_main(lambda: args.run(args))
