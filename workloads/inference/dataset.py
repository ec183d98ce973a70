"""The inference harness's dataset command line (``inference.yaml`` ``data.cli``), run where the
harness runs:

    python -m workloads.inference.dataset check MODEL DIR   # the model's layout, every image there
    python -m workloads.inference.dataset prepare MODEL SRC --cache DIR [--input-shape C,D,H,W | --model FILE]
        [--workers N]
        # the folder a run uses: SRC when it is in the model's layout; else what the model makes of
        # SRC under DIR, once (3d-unet: raw KiTS19 preprocessed as the reference does)
    python -m workloads.inference.dataset smoke MODEL OUT [--data-only]   # the smoke model and data, made once
    python -m workloads.inference.dataset upscale ssd-resnet34 COCO OUT [--size W H] [--format jpg|png]
        # COCO 2017 val upscaled as the reference's tools/upscale_coco/upscale_coco.py (1200 x 1200)

Exit codes: 0 ok (the folder on stdout, alone, for prepare and smoke), 2 bad input or data (one line
on stderr).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from workloads.common.cli import Parser, run_main
from workloads.common.cpus import usable_cpus
from workloads.inference.errors import HarnessError
from workloads.inference.models import find, names, smoke_maker


def main(argv: list[str] | None = None) -> int:
    models = names()
    parser = Parser(prog="python -m workloads.inference.dataset", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    check = commands.add_parser("check", help="check that DIR holds MODEL's dataset")
    check.add_argument("model", choices=models)
    check.add_argument("dir", type=Path)
    prepare = commands.add_parser("prepare", help="print the folder a run of MODEL uses for SRC (made once in DIR)")
    prepare.add_argument("model", choices=models)
    prepare.add_argument("src", type=Path)
    prepare.add_argument("--cache", type=Path, required=True, help="where a dataset made from SRC goes")
    prepare.add_argument("--input-shape", type=shape, help="the model's input without its batch axis (C,D,H,W)")
    prepare.add_argument("--model", type=Path, dest="model_file",
                         help="the model file whose input (C,D,H,W) the dataset is prepared for, read from it (a "
                              ".pt2 is loaded: give only one you made), instead of --input-shape")
    prepare.add_argument("--workers", type=int, default=0,
                         help="processes at most, one per 64 MiB of raw files (0: the usable CPUs)")
    smoke = commands.add_parser("smoke", help="make the smoke model and data in OUT (once)")
    smoke.add_argument("model", choices=models)
    smoke.add_argument("out", type=Path)
    smoke.add_argument("--data-only", action="store_true", help="the data alone (for a model trained elsewhere)")
    upscale = commands.add_parser("upscale", help="COCO upscaled as the reference's upscale_coco.py (the model's size)")
    upscale.add_argument("model", choices=models)
    upscale.add_argument("src", type=Path, help="COCO: SRC/val2017/*.jpg, SRC/annotations/instances_val2017.json")
    upscale.add_argument("out", type=Path, help="a new folder, the same layout")
    upscale.add_argument("--size", type=int, nargs=2, metavar=("W", "H"), help="default: the model's input side")
    upscale.add_argument("--format", choices=("jpg", "png"), default="jpg", help="jpg (the reference's default) or png")
    upscale.add_argument("--workers", type=int, default=0, help="processes (0: the usable CPUs)")
    args = parser.parse_args(argv)
    return run_main(lambda: _run(args))


def shape(text: str) -> tuple[int, ...]:
    try:
        dims = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give the sizes, comma separated") from None
    if not dims or min(dims) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: every size must be at least 1")
    return dims


def model_input_shape(path: Path) -> tuple[int, ...]:
    """The model file's input without its batch axis, read by its runtime (ONNX Runtime for .onnx, torch
    for a .pt2, which the caller vouches for); HarnessError when an axis after the batch is not a size."""
    from workloads.inference import backends

    backend = backends.load("torch" if path.suffix == ".pt2" else "onnxruntime", path, device="cpu", threads=1,
                            trace_dir=None, trust_model=True)
    dims = tuple(backend.loaded.input_shape[1:])
    if not dims or not all(isinstance(d, int) and d > 0 for d in dims):
        raise HarnessError(f"{path}: its input {list(backend.loaded.input_shape)} has free axes after the batch: "
                           "export it for one input size")
    return dims  # type: ignore[return-value]


def _run(args: argparse.Namespace) -> None:
    if args.command == "check":
        if not args.dir.is_dir():
            raise HarnessError(f"{args.dir}: no such dataset folder")
        sys.stdout.write(find(args.model).check(args.dir) + "\n")
    elif args.command == "prepare":
        if not args.src.is_dir():
            raise HarnessError(f"{args.src}: no such dataset folder")
        module = find(args.model)
        input_shape = args.input_shape if args.model_file is None else model_input_shape(args.model_file)
        if hasattr(module, "prepare"):
            folder = module.prepare(args.src, args.cache, input_shape, args.workers or usable_cpus())
        else:
            folder = args.src
        sys.stderr.write(module.check(folder) + "\n")
        sys.stdout.write(f"{folder}\n")
    elif args.command == "upscale":
        from workloads.inference.coco_upscale import upscale

        size = getattr(find(args.model), "UPSCALE_SIZE", None)
        if size is None:
            raise HarnessError(f"{args.model} reads its dataset as it is: only ssd-resnet34 takes COCO upscaled")
        size = tuple(args.size) if args.size else size
        written = upscale(args.src, args.out, size=size, fmt=args.format, workers=args.workers or usable_cpus())
        sys.stderr.write(f"{written} images upscaled to {size[0]}x{size[1]} {args.format} in {args.out}\n")
        sys.stdout.write(f"{args.out}\n")
    else:
        made = smoke_maker(args.model).make(args.out, with_model=not args.data_only)
        sys.stderr.write(f"{'made' if made else 'already present:'} smoke {args.model} model and data\n")
        sys.stdout.write(f"{args.out}\n")


if __name__ == "__main__":
    sys.exit(main())
