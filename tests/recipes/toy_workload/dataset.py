"""The toy's dataset command line: `synthesize OUT [POINTS]`, and the shared `check DIR`, `prepare SRC
--cache DIR` and `how-to-get` of a dataset with no raw form (workloads/common/dataset_cli.py)."""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
from pathlib import Path

from workloads.common.cli import Parser
from workloads.common.dataset_cli import add_check_and_prepare, add_how_to_get
from workloads.common.dataset_cli import main as dataset_main
from workloads.common.errors import DataError

MARKER = ".mltrain-ready"


def synthesize(out: Path, points: int) -> None:
    if (out / MARKER).is_file():
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    staged = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))  # complete or not at all
    draw = random.Random(0)
    xs = [draw.uniform(-1, 1) for _ in range(points)]
    (staged / "points.json").write_text(json.dumps([[x, 3 * x + 1] for x in xs]))
    (staged / MARKER).write_text("toy\n")
    os.replace(staged, out)


def check_ready(folder: Path) -> str:
    if not (folder / "points.json").is_file():
        raise DataError(f"{folder}: points.json missing: not a toy dataset")
    return f"{folder}: a toy dataset"


def parser() -> argparse.ArgumentParser:
    root = Parser(prog="python -m workloads.toy.dataset", description=__doc__.splitlines()[0])
    commands = root.add_subparsers(dest="command", required=True)
    make = commands.add_parser("synthesize", help="write POINTS synthetic points into OUT")
    make.add_argument("out", type=Path)
    make.add_argument("points", type=int, nargs="?", default=64)
    make.set_defaults(run=lambda args: synthesize(args.out, args.points))
    add_check_and_prepare(commands, check_ready)
    add_how_to_get(commands, "make one with: mltrain data toy synthesize DIR\n", help="where its data comes from")
    return root


def main(argv: list[str] | None = None) -> int:
    return dataset_main(parser, argv)


if __name__ == "__main__":
    sys.exit(main())
