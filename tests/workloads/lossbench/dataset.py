"""Dataset CLI of the loss-metric test workload: `synthesize OUT` writes a marker dataset,
`check DIR` checks it, `prepare SRC --cache DIR` prints SRC when it passes `check`."""

import json
import os
import sys
import tempfile
from pathlib import Path

MARKER = ".mltrain-ready"


def synthesize(out: Path) -> int:
    if (out / MARKER).is_file():
        return 0
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    (tmp / "documents.json").write_text(json.dumps({"train": 3901, "eval": 173}))
    (tmp / MARKER).write_text("lossbench\n")
    os.replace(tmp, out)
    return 0


def check(folder: Path) -> int:
    if not (folder / "documents.json").is_file():
        sys.stderr.write(f"{folder}: documents.json missing: not a lossbench dataset\n")
        return 2
    return 0


def main(argv: list[str]) -> int:
    if len(argv) == 4 and argv[0] == "prepare" and argv[2] == "--cache":
        code = check(Path(argv[1]))
        if code == 0:
            sys.stdout.write(f"{argv[1]}\n")
        return code
    if len(argv) != 2 or argv[0] not in ("synthesize", "check"):
        sys.stderr.write("usage: dataset.py synthesize OUT | check DIR | prepare SRC --cache DIR\n")
        return 2
    folder = Path(argv[1])
    return synthesize(folder) if argv[0] == "synthesize" else check(folder)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
