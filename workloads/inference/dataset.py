"""The inference harness's dataset command line (``inference.yaml`` ``data.cli``), run where the
harness runs:

    python -m workloads.inference.dataset check MODEL DIR   # the model's layout, every image there
    python -m workloads.inference.dataset smoke MODEL OUT   # the smoke model and data, made once

Exit codes: 0 ok (the folder on stdout, alone, for smoke), 2 bad input or data (one line on stderr).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from workloads.common.cli import Parser, run_main
from workloads.inference.errors import HarnessError
from workloads.inference.models import MODULES, find


def main(argv: list[str] | None = None) -> int:
    parser = Parser(prog="python -m workloads.inference.dataset", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    check = commands.add_parser("check", help="check that DIR holds MODEL's dataset")
    check.add_argument("model", choices=sorted(MODULES))
    check.add_argument("dir", type=Path)
    smoke = commands.add_parser("smoke", help="make the smoke model and data in OUT (once)")
    smoke.add_argument("model", choices=sorted(MODULES))
    smoke.add_argument("out", type=Path)
    args = parser.parse_args(argv)
    return run_main(lambda: _run(args))


def _run(args: argparse.Namespace) -> None:
    if args.command == "check":
        if not args.dir.is_dir():
            raise HarnessError(f"{args.dir}: no such dataset folder")
        sys.stdout.write(find(args.model).check(args.dir) + "\n")
    else:
        from workloads.inference.smoke import make

        made = make(args.model, args.out)
        sys.stderr.write(f"{'made' if made else 'already present:'} smoke {args.model} model and data\n")
        sys.stdout.write(f"{args.out}\n")


if __name__ == "__main__":
    sys.exit(main())
