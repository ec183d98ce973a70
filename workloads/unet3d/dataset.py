"""The unet3d dataset command line: ``python -m workloads.unet3d.dataset <command> ...``.

    how-to-get                         where raw KiTS19 goes and how to download it
    verify-raw RAW                     check the raw layout (cases, files, headers, voxels: raw_case's rule)
    preprocess RAW OUT                 raw KiTS19 -> case_XXXXX_{x,y}.npy (resumable, parallel)
    verify OUT [--checksums FILE|reference]   md5 of every file vs the manifest or the reference
    generate-raw RAW --cases N --seed S [--size tiny|small|real|D,H,W]   synthetic raw layout
    synthesize OUT [--cases N --seed S --size ... --min-shape M --eval-cases K]   training-ready set
    check DIR                          fast check that DIR is training ready
    prepare SRC --cache DIR [--min-shape M]   print the training-ready folder for SRC: SRC when
                                       ready; raw KiTS19 preprocessed once under DIR (cached by
                                       content, resumable, verified when it is the real KiTS19)

Exit codes: 0 ok, 2 bad input or data (one line on stderr naming the case or file), 1 other.
Status and summaries go to stderr; nothing is written to stdout except by ``how-to-get`` and
``prepare`` (the folder, one line).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from pathlib import Path

from workloads.common.cli import Parser, run_main
from workloads.common.cpus import usable_cpus
from workloads.common.errors import DataError, Failure

HOW_TO_GET = """\
Raw KiTS19 (MLPerf unet3d) is about 29 GB and comes from the public kits19 repository:

    git clone https://github.com/neheller/kits19
    cd kits19 && pip install -r requirements.txt
    python -m starter_code.get_imaging        # downloads data/case_XXXXX/imaging.nii.gz

The segmentations (segmentation.nii.gz) and data/kits.json are in that repository already.
Use kits19/data as RAW (cases 0..209 are used; 210+ have no labels and are ignored):

    python -m workloads.unet3d.dataset verify-raw RAW
    python -m workloads.unet3d.dataset preprocess RAW OUT          # OUT is the training DATADIR
    python -m workloads.unet3d.dataset verify OUT --checksums reference

The last command proves the preprocessed files are bit-identical to the MLPerf reference's
(workloads/unet3d/checksum.json). Without the real data, `synthesize OUT` makes a KiTS19-like
synthetic set through the same preprocessing.
"""


def _say(message: str) -> None:
    """The CLI's one way to report status: a line on stderr."""
    sys.stderr.write(message + "\n")


@contextmanager
def _progress(description: str, total: int | None) -> Iterator[Callable[[], None]]:
    """A rich progress bar on a terminal's stderr, cleared when done (the summary line follows);
    nothing elsewhere (a pipe, a helper container, an image without rich), so that a failure
    stays the one line on stderr. Yields `advance`."""
    if sys.stderr.isatty():
        try:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
        except ImportError:  # an image without rich
            pass
        else:
            columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
            with Progress(*columns, console=Console(stderr=True), transient=True) as progress:
                task = progress.add_task(description, total=total)
                yield lambda: progress.advance(task)
            return
    yield lambda: None


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be at least 1")
    return value


# ---- commands -------------------------------------------------------------------------------


def cmd_how_to_get(args: argparse.Namespace) -> int:
    sys.stdout.write(HOW_TO_GET)
    return 0


def cmd_verify_raw(args: argparse.Namespace) -> int:
    from workloads.unet3d.raw_check import list_raw_cases, verify_raw

    started = time.perf_counter()
    with _progress("verify-raw", len(list_raw_cases(args.raw))) as advance:
        cases = verify_raw(args.raw, args.workers, not args.headers_only, lambda case: advance())
    what = "headers" if args.headers_only else "headers and data"
    _say(f"{args.raw}: {len(cases)} cases OK ({what}) in {time.perf_counter() - started:.1f} s")
    return 0


def cmd_preprocess(args: argparse.Namespace) -> int:
    from workloads.unet3d.preprocess import PreprocessConfig, preprocess_dataset
    from workloads.unet3d.raw_check import list_raw_cases

    config = PreprocessConfig(raw_dir=args.raw, out_dir=args.out, min_shape=args.min_shape, workers=args.workers)
    total = len(list_raw_cases(args.raw))
    with _progress("preprocess", total) as advance:
        summary = preprocess_dataset(config, lambda result, total: advance())
    smallest, largest = summary.shape_range()
    _say(
        f"{args.out}: {len(summary.results)} cases ({summary.processed} preprocessed, "
        f"{len(summary.results) - summary.processed} unchanged), shapes {_shape(smallest)} .. {_shape(largest)}, "
        f"{summary.seconds:.1f} s with {config.workers} worker{'s' if config.workers != 1 else ''}"
    )
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    from workloads.unet3d.verify import MANIFEST, REFERENCE_CHECKSUMS, verify_checksums

    if args.checksums == "reference":
        source, reference = REFERENCE_CHECKSUMS, True
    elif args.checksums is not None:
        source, reference = Path(args.checksums), Path(args.checksums).name != MANIFEST
    elif (args.out / MANIFEST).is_file():
        source, reference = args.out / MANIFEST, False
    else:
        source, reference = REFERENCE_CHECKSUMS, True
    count = verify_checksums(args.out, source, reference)
    _say(f"{args.out}: all {count} files match {source}")
    return 0


def cmd_generate_raw(args: argparse.Namespace) -> int:
    from workloads.unet3d.synthetic import parse_size
    from workloads.unet3d.synthetic_raw import check_case_count, generate_raw

    check_case_count(args.cases)
    size = parse_size(args.size)
    started = time.perf_counter()
    with _progress("generate", args.cases) as advance:
        generate_raw(
            args.raw, args.cases, args.seed, size, args.workers, lambda entry: advance(), args.tumour_contrast
        )
    _say(f"{args.raw}: {args.cases} synthetic cases (seed {args.seed}) in {time.perf_counter() - started:.1f} s")
    return 0


def cmd_synthesize(args: argparse.Namespace) -> int:
    from workloads.unet3d.synthesize import SynthesizeConfig, ready_record, synthesize

    config = SynthesizeConfig(
        cases=args.cases,
        seed=args.seed,
        size=args.size,
        min_shape=args.min_shape,
        eval_cases=args.eval_cases,
        tumour_contrast=args.tumour_contrast,
        workers=args.workers,
    )
    if ready_record(args.out) == config.record():
        _say(f"{args.out}: already ready with these arguments, nothing to do")
        return 0
    started = time.perf_counter()
    with _progress("synthesize", 2 * config.cases) as advance:
        synthesize(args.out, config, lambda entry: advance(), lambda result, total: advance())
    _say(f"{args.out}: {config.cases} synthetic cases ready in {time.perf_counter() - started:.1f} s")
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from workloads.unet3d.verify import check_ready

    summary = check_ready(args.dir)
    _say(
        f"{args.dir}: ready ({summary.train} train + {summary.evaluation} eval cases, "
        f"smallest volume {_shape(summary.smallest)})"
    )
    return 0


def cmd_prepare(args: argparse.Namespace) -> int:
    from workloads.unet3d.prepare import prepare
    from workloads.unet3d.raw_check import list_raw_cases

    started = time.perf_counter()
    try:
        total: int | None = len(list_raw_cases(args.src))
    except DataError:
        total = None  # not raw: prepare says what it is
    with _progress("preprocess", total) as advance:
        prepared = prepare(args.src, args.cache, min_shape=args.min_shape, workers=args.workers,
                           on_case=lambda result, total: advance())
    if prepared.made:
        checked = ", checksums match the MLPerf reference" if prepared.verified else ""
        _say(f"{args.src}: preprocessed into {prepared.folder} in {time.perf_counter() - started:.1f} s{checked}")
    elif prepared.folder != args.src:
        _say(f"{args.src}: preprocessed before, in {prepared.folder}")
    sys.stdout.write(f"{prepared.folder}\n")
    return 0


def _shape(shape: Sequence[int]) -> str:
    return "x".join(str(n) for n in shape)


# ---- parser ---------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="python -m workloads.unet3d.dataset",
        description="unet3d (KiTS19) data: raw checks, reference preprocessing, synthetic datasets.",
    )
    commands = parser.add_subparsers(dest="command", required=True)

    how = commands.add_parser("how-to-get", help="where raw KiTS19 goes and how to download it")
    how.set_defaults(run=cmd_how_to_get)

    raw = commands.add_parser("verify-raw", help="check a raw KiTS19 layout")
    raw.add_argument("raw", type=Path, help="folder holding case_XXXXX/ folders")
    _add_workers(raw)
    raw.add_argument("--headers-only", action="store_true", help="skip decompressing the volumes (fast)")
    raw.set_defaults(run=cmd_verify_raw)

    pre = commands.add_parser("preprocess", help="raw KiTS19 -> training-ready .npy files")
    pre.add_argument("raw", type=Path, help="raw layout (case_XXXXX/imaging.nii.gz, segmentation.nii.gz)")
    pre.add_argument("out", type=Path, help="output folder (the training DATADIR)")
    _add_workers(pre)
    pre.add_argument("--min-shape", type=_positive, default=128, help="pad axes up to this (128 = closed)")
    pre.set_defaults(run=cmd_preprocess)

    ver = commands.add_parser("verify", help="md5 of every preprocessed file")
    ver.add_argument("out", type=Path, help="preprocessed folder")
    ver.add_argument(
        "--checksums",
        help="'reference' (checksum.json of the MLPerf reference), a checksum or manifest file; "
        "default: OUT/manifest.json when present, else the reference",
    )
    ver.set_defaults(run=cmd_verify)

    gen = commands.add_parser("generate-raw", help="write a synthetic KiTS19-like raw layout")
    gen.add_argument("raw", type=Path, help="output folder")
    _add_generator_args(gen)
    gen.set_defaults(run=cmd_generate_raw)

    syn = commands.add_parser("synthesize", help="make a training-ready synthetic dataset (atomic)")
    syn.add_argument("out", type=Path, help="dataset folder to create")
    _add_generator_args(syn)
    syn.add_argument("--min-shape", type=_positive, default=128, help="pad axes up to this (128 = closed)")
    syn.add_argument(
        "--eval-cases", type=_positive, default=None, help="evaluation cases (default: 42/210 of --cases)"
    )
    syn.set_defaults(run=cmd_synthesize)

    chk = commands.add_parser("check", help="fast check that a folder is training ready")
    chk.add_argument("dir", type=Path, help="dataset folder")
    chk.set_defaults(run=cmd_check)

    prep = commands.add_parser("prepare", help="print the training-ready folder for SRC (raw: preprocessed once)")
    prep.add_argument("src", type=Path, help="training-ready folder, or raw KiTS19 layout")
    prep.add_argument("--cache", type=Path, required=True, help="where preprocessed raw data is kept")
    prep.add_argument("--min-shape", type=_positive, default=128, help="pad axes up to this (128 = closed)")
    _add_workers(prep, " at most: one per 64 MiB of raw files")
    prep.set_defaults(run=cmd_prepare)
    return parser


def _add_workers(parser: argparse.ArgumentParser, bound: str = "") -> None:
    parser.add_argument("--workers", type=_positive, default=usable_cpus(),
                        help=f"parallel processes{bound} (default: the CPUs this process may use, cgroup quota "
                             "included)")


def _add_generator_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cases", type=_positive, default=20, help="number of cases (ids 0..N-1, at most 210)")
    parser.add_argument("--seed", type=int, default=0, help="generator seed (default 0)")
    parser.add_argument(
        "--size",
        default="small",
        help="tiny, small, real (512x512xN) or D,H,W: approximate shape after preprocessing (default small)",
    )
    parser.add_argument(
        "--tumour-contrast",
        type=float,
        default=1.0,
        help="scale tumours' HU distance below the medulla (default 1.0; > 1 makes tumours easier to segment)",
    )
    _add_workers(parser)


def _run(args: argparse.Namespace) -> int:
    """The command, its operating-system errors said in one line: a missing or unusable file or
    folder is bad input (2), a dead worker or another OS error a failure (1)."""
    try:
        return args.run(args)
    except (FileNotFoundError, PermissionError, NotADirectoryError, IsADirectoryError, FileExistsError) as err:
        raise DataError(f"{err.strerror}: {err.filename}") from None
    except BrokenProcessPool:
        raise Failure("a worker process died (out of memory?); retry with fewer --workers") from None
    except OSError as err:
        raise Failure(str(err)) from None


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_main(lambda: _run(args), prefix="error",
                    interrupted="interrupted (finished work is kept; run the same command again to resume)")


if __name__ == "__main__":
    sys.exit(main())
