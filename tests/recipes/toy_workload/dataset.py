"""The toy's dataset command line: `synthesize OUT [POINTS]`, `check DIR`, `prepare SRC --cache DIR`."""

from __future__ import annotations

import json
import os
import random
import sys
import tempfile
from pathlib import Path

MARKER = ".mltrain-ready"


def synthesize(out: Path, points: int) -> int:
    if (out / MARKER).is_file():
        return 0
    out.parent.mkdir(parents=True, exist_ok=True)
    staged = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))  # complete or not at all
    draw = random.Random(0)
    xs = [draw.uniform(-1, 1) for _ in range(points)]
    (staged / "points.json").write_text(json.dumps([[x, 3 * x + 1] for x in xs]))
    (staged / MARKER).write_text("toy\n")
    os.replace(staged, out)
    return 0


def check(folder: Path) -> int:
    if not (folder / "points.json").is_file():
        sys.stderr.write(f"{folder}: points.json missing: not a toy dataset\n")
        return 2
    return 0


def main(argv: list[str]) -> int:
    if len(argv) == 4 and argv[0] == "prepare" and argv[2] == "--cache":
        code = check(Path(argv[1]))
        if code == 0:
            sys.stdout.write(f"{argv[1]}\n")
        return code
    if len(argv) in (2, 3) and argv[0] == "synthesize":
        return synthesize(Path(argv[1]), int(argv[2]) if len(argv) == 3 else 64)
    if len(argv) == 2 and argv[0] == "check":
        return check(Path(argv[1]))
    sys.stderr.write("usage: dataset.py synthesize OUT [POINTS] | check DIR | prepare SRC --cache DIR\n")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
