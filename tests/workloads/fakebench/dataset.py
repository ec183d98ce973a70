"""Dataset CLI of the fake workload: `synthesize OUT` writes a marker dataset, `check DIR` checks it,
`prepare SRC --cache DIR` prints the training-ready folder: SRC when it passes `check`, else, for a
"raw" folder (one holding raw.txt), a dataset made from it once in DIR (keyed by raw.txt's bytes)."""

import hashlib
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
    (tmp / "cases.json").write_text(json.dumps({"train": 168, "eval": 42}))
    (tmp / MARKER).write_text("fakebench\n")
    os.replace(tmp, out)
    sys.stdout.write(f"wrote {out}: a fakebench dataset\n")  # as real dataset tools report
    return 0


def check(folder: Path) -> int:
    if not folder.is_dir():
        sys.stderr.write(f"{folder}: no such data folder\n")
        return 2
    if not (folder / "cases.json").is_file():
        sys.stderr.write(f"{folder}: cases.json missing: not a fakebench dataset\n")
        return 2
    return 0


def prepare(src: Path, cache: Path) -> int:
    raw = src / "raw.txt"
    if not raw.is_file():
        code = check(src)
        if code == 0:
            sys.stdout.write(f"{src}\n")
        return code
    out = cache / f"fake-{hashlib.sha256(raw.read_bytes()).hexdigest()[:12]}"
    if not (out / MARKER).is_file():
        sys.stderr.write(f"preparing {src} into {out}\n")
        cache.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=cache))
        (tmp / "cases.json").write_text(json.dumps({"train": 168, "eval": 42, "from": raw.read_text()}))
        (tmp / MARKER).write_text("fakebench\n")
        os.replace(tmp, out)
    sys.stdout.write(f"{out}\n")
    return 0


def main(argv: list[str]) -> int:
    if len(argv) == 4 and argv[0] == "prepare" and argv[2] == "--cache":
        return prepare(Path(argv[1]), Path(argv[3]))
    if len(argv) != 2 or argv[0] not in ("synthesize", "check"):
        sys.stderr.write("usage: dataset.py synthesize OUT | check DIR | prepare SRC --cache DIR\n")
        return 2
    folder = Path(argv[1])
    return synthesize(folder) if argv[0] == "synthesize" else check(folder)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
