"""The resnet50 dataset command line (the workload contract's ``data.cli``).

    python -m workloads.resnet50.dataset synthesize OUT [--classes 10 --train-per-class 64 ...]
    python -m workloads.resnet50.dataset check DIR      # layout, counts, a sample decodes (seconds)
    python -m workloads.resnet50.dataset prepare DIR --cache C   # prints DIR when it passes check
    python -m workloads.resnet50.dataset verify DIR     # layout, counts, and every image decodes
    python -m workloads.resnet50.dataset how-to-get

Exit codes: 0 ok, 2 bad input or data (one line on stderr naming the folder or file), 1 other.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from PIL import Image

from workloads.common.cli import Parser
from workloads.common.dataset_cli import add_check_and_prepare, add_how_to_get, say
from workloads.common.dataset_cli import main as dataset_main
from workloads.resnet50.errors import DatasetError, LayoutError
from workloads.resnet50.layout import DECODE_ERRORS, Split, expected_counts, list_dataset
from workloads.resnet50.synthetic import SyntheticSpec, synthesize

CHECK_SAMPLE_CLASSES = 50
"""``check`` decodes the first image of this many classes per split."""

HOW_TO_GET = """\
ResNet-50 trains on ImageNet 2012 (ILSVRC2012): 1,281,167 training and 50,000 validation images
in 1000 classes. It is not redistributable: register at https://image-net.org, download
ILSVRC2012_img_train.tar and ILSVRC2012_img_val.tar, then lay it out as
  DIR/train/<wnid>/*.JPEG   (untar the train tar, then untar each of its 1000 class tars into
                             a folder named after it, e.g. train/n01440764/)
  DIR/val/<wnid>/*.JPEG     (the val tar is flat: move each image into the folder of its class,
                             using the ILSVRC2012 validation ground truth, e.g. the widely used
                             valprep.sh script)
and check it with `python -m workloads.resnet50.dataset verify DIR`
(or `mltrain data verify resnet50`). Smoke runs need none of this: their data is synthetic.
"""


def decode_problem(path: Path) -> str | None:
    """None when ``path`` decodes to an RGB-convertible image, else why not."""
    try:
        with Image.open(path) as image:
            image.load()
            if image.width < 1 or image.height < 1:
                return "empty image"
            image.convert("RGB")
    except DECODE_ERRORS as error:
        return " ".join(str(error).split()) or type(error).__name__
    return None


def _decode_chunk(paths: list[Path]) -> list[tuple[Path, str]]:
    return [(path, problem) for path in paths if (problem := decode_problem(path)) is not None]


def _chunks(items: list[Path], size: int) -> Iterable[list[Path]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def layout_and_counts(root: Path) -> tuple[Split, Split]:
    """Both splits, after checking the class count and the images per split."""
    try:
        train, val = list_dataset(root)
        classes, counts = expected_counts(root)
    except LayoutError as exc:
        raise DatasetError(str(exc)) from None
    if len(train.classes) != classes:
        raise DatasetError(f"{root / 'train'}: {len(train.classes)} class folders, expected {classes}")
    for split in (train, val):
        if len(split.samples) != counts[split.name]:
            raise DatasetError(f"{root / split.name}: {len(split.samples)} images, expected {counts[split.name]}")
    return train, val


def progress(message: str) -> None:
    """Status for a human watching a long scan; silent when stderr is not a terminal, so that a
    failure stays the single line on stderr that scripts and the orchestrator read."""
    if sys.stderr.isatty():
        sys.stderr.write(message + "\n")
        sys.stderr.flush()


def bad_images(paths: list[Path], workers: int, chunk: int = 500) -> list[tuple[Path, str]]:
    """Every (path, problem) of an image that does not decode, decoding in ``workers`` processes."""
    if workers <= 1 or len(paths) < 2 * chunk:
        return _decode_chunk(paths)
    bad: list[tuple[Path, str]] = []
    report_every = max(1, len(paths) // chunk // 20)  # about every 5 %
    with ProcessPoolExecutor(max_workers=workers) as pool:
        for index, found in enumerate(pool.map(_decode_chunk, _chunks(paths, chunk)), start=1):
            bad += found
            if index % report_every == 0:
                done = min(index * chunk, len(paths))
                progress(f"verify: {done}/{len(paths)} images decoded, {len(bad)} unreadable")
    return bad


def first_of_each_class(split: Split, limit: int) -> list[Path]:
    firsts: dict[int, Path] = {}
    for path, label in split.samples:
        firsts.setdefault(label, path)
    return [firsts[label] for label in sorted(firsts)[:limit]]


def raise_if_bad(bad: list[tuple[Path, str]]) -> None:
    if bad:
        path, problem = bad[0]
        more = f" (and {len(bad) - 1} more unreadable images)" if len(bad) > 1 else ""
        raise DatasetError(f"{path}: cannot decode: {problem}{more}")


def cmd_synthesize(args: argparse.Namespace) -> None:
    try:
        spec = SyntheticSpec(classes=args.classes, train_per_class=args.train_per_class,
                             val_per_class=args.val_per_class, size=args.size, mislabeled=args.mislabeled,
                             seed=args.seed, quality=args.quality)
    except ValueError as exc:
        raise DatasetError(str(exc)) from None
    try:
        made = synthesize(spec, args.out)
    except FileExistsError as exc:
        raise DatasetError(str(exc)) from None
    counts = spec.counts()
    verb = "wrote" if made else "already present:"
    say(f"{verb} {args.out}: {spec.classes} classes, {counts['train']} train and {counts['val']} val images")


def check_ready(root: Path) -> str:
    """The fast check (layout, counts, a sample decodes); the line that says it passed."""
    train, val = layout_and_counts(root)
    sample = [path for split in (train, val) for path in first_of_each_class(split, CHECK_SAMPLE_CLASSES)]
    raise_if_bad(_decode_chunk(sample))
    return f"ok {root}: {len(train.classes)} classes, {len(train.samples)} train and {len(val.samples)} val images"


def cmd_verify(args: argparse.Namespace) -> None:
    train, val = layout_and_counts(args.dir)
    paths = [path for split in (train, val) for path, _ in split.samples]
    raise_if_bad(bad_images(paths, args.workers))
    say(f"ok {args.dir}: {len(train.classes)} classes, {len(train.samples)} train and {len(val.samples)} val "
        f"images, all decode")


def parser() -> argparse.ArgumentParser:
    root = Parser(prog="python -m workloads.resnet50.dataset", description=__doc__.splitlines()[0])
    commands = root.add_subparsers(dest="command", required=True)
    defaults = SyntheticSpec()
    make = commands.add_parser("synthesize", help="write a synthetic ImageNet-like dataset into OUT")
    make.add_argument("out", type=Path)
    make.add_argument("--classes", type=int, default=defaults.classes)
    make.add_argument("--train-per-class", type=int, default=defaults.train_per_class)
    make.add_argument("--val-per-class", type=int, default=defaults.val_per_class)
    make.add_argument("--size", type=int, default=defaults.size, help="image side in pixels")
    make.add_argument("--mislabeled", type=float, default=defaults.mislabeled,
                      help="fraction of each val class drawn from another class")
    make.add_argument("--seed", type=int, default=defaults.seed)
    make.add_argument("--quality", type=int, default=defaults.quality, help="JPEG quality")
    make.set_defaults(run=cmd_synthesize)
    add_check_and_prepare(commands, check_ready)  # ImageNet has no raw form here: a ready folder is its own
    verify = commands.add_parser("verify", help="check layout and counts and decode every image")
    verify.add_argument("dir", type=Path)
    verify.add_argument("--workers", type=int, default=2, help="decoding processes")
    verify.set_defaults(run=cmd_verify)
    add_how_to_get(commands, HOW_TO_GET, help="where the real ImageNet comes from")
    return root


def main(argv: list[str] | None = None) -> int:
    return dataset_main(parser, argv)


if __name__ == "__main__":
    sys.exit(main())
