"""Make, where PyPI is reachable, the kit a GPU machine without a network needs for `benchmarks/gpu_session.sh`.

    # the lent GPU machines (their image's packages: tools/gpu_image.txt, Python 3.12)
    python3 tools/gpu_kit.py --out .gpukit --reference ~/src/training
    # another machine: its own package list, read there with `python3 -m pip list --format=freeze`
    python3 tools/gpu_kit.py --out .gpukit --have have.txt --python-version 3.11 --reference ~/src/training
    # offline: every wheel from a local folder
    python3 tools/gpu_kit.py --out .gpukit --wheels ~/wheelhouse --reference ~/src/training.git

A GPU machine that cannot reach an index holds CUDA torch and much else; what it lacks is carried in,
and what may be carried is small (64 MiB with the project on the machines lent here). So the kit
holds only what the target lacks:

- ``wheels/``: what mltrain, its ``workloads`` extra and the test runner need for the target
  interpreter (``--python-version``, CPython, manylinux x86_64), resolved here one level of
  ``Requires-Dist`` at a time (markers evaluated for the target), less every package the target
  already holds (``--have``: a ``pip list`` of it; by default ``tools/gpu_image.txt``, the lent
  machines' image) and less ``--skip``. torch, numpy, triton and CUDA's own libraries are never
  carried: the GPU machine's CUDA stack is what is measured. setuptools and wheel always are: pip's
  isolated build of the project finds its build backend only in the kit when there is no index.
  A package the list names with a version that does not satisfy a requirement is carried.
- ``reference/unet3d``: the MLPerf reference's unet3d (mlcommons/training
  ``retired_benchmarks/unet3d/pytorch``), read by ``benchmarks/unet3d_gpu_throughput.py``, from a
  local checkout or a bare mirror (``git clone --mirror https://github.com/mlcommons/training``
  where GitHub is reachable). It is checked before anything is downloaded, and never committed.
- ``MANIFEST.txt``: the target (``python: X.Y``, which gpu_session.sh compares with the machine's
  before installing anything), the SHA-256 of the pyproject.toml the wheels were resolved for, the
  reference's commit, and every wheel with its size.

A kit over ``--limit-mib`` (60 by default: the 64 MiB carried less room for the project) is not
written: the line names the largest wheels and what to do. The kit appears whole or not at all.
Exit 0 when the kit is complete, 2 on bad input (one line), 3 when pip or git failed (their output).
Beside this file: kit_target.py (what the target holds), kit_wheels.py (resolving and downloading the
wheels), kit_reference.py (checking and copying the reference).
"""

from __future__ import annotations

import argparse
import hashlib
import math
import re
import shutil
import sys
import tempfile
from pathlib import Path

from kit_reference import REFERENCE_PATH, check_reference, copy_reference
from kit_target import HAVE_MAX_BYTES, KitError, Target, folder_problem, read_have, read_small_file
from kit_wheels import (
    BUILD_REQUIREMENTS,
    NEVER_CARRIED,
    PROJECT,
    Pip,
    never_carried,
    project_requirements,
    resolve,
)
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name, parse_wheel_filename

IMAGE_PACKAGES = PROJECT / "tools" / "gpu_image.txt"


LIMIT_MIB = 60.0


def mib(size: int) -> str:
    return f"{size / 2**20:.1f} MiB"


def load_target(args: argparse.Namespace) -> Target:
    held, declared = read_have(args.have)
    python = args.python_version or declared
    if python is None:
        raise KitError(f"--have {args.have} does not say which Python it lists: give --python-version X.Y "
                       "(on the target: python3 -c 'import sys; print(sys.version[:4])')", 2)
    if not re.fullmatch(r"3\.\d{1,2}", python):
        raise KitError(f"--python-version {python!r}: give major.minor, e.g. 3.12", 2)
    if declared and args.python_version and declared != args.python_version:
        raise KitError(f"--python-version {args.python_version}, but --have {args.have} lists a Python {declared}: "
                       "give the list read on the machine the kit is for", 2)
    return Target(python, held, str(args.have))


KIT_ENTRIES = {"MANIFEST.txt", "wheels", "reference"}
"""What a kit folder holds: a folder holding these alone, with a kit's MANIFEST.txt, is a previous kit."""


def check_out(out: Path) -> bool:
    """Whether ``out`` holds a previous kit (replaced once the new one is made); KitError (2) when it is
    anything but that, an empty folder or a new one: a kit never replaces what it did not make."""
    how = "name a new or empty folder, or a previous kit's (e.g. --out .gpukit)"
    if out.is_symlink():
        raise KitError(f"--out {out}: a symbolic link; {how}", 2)
    if not out.exists():
        return False
    if not out.is_dir():
        raise KitError(f"--out {out}: is a file; {how}", 2)
    here = Path.cwd().resolve()
    if out.resolve() in (here, *here.parents, PROJECT, *PROJECT.parents):
        raise KitError(f"--out {out}: the current folder, the project or a folder holding them; {how}", 2)
    held = {entry.name for entry in out.iterdir()}
    if not held:
        return False
    manifest = out / "MANIFEST.txt"
    try:
        is_kit = held <= KIT_ENTRIES and manifest.is_file() and \
            read_small_file(manifest, HAVE_MAX_BYTES).startswith(b"target: CPython ")
    except OSError:
        is_kit = False
    if not is_kit:
        shown = ", ".join(sorted(held)[:3]) + (" ..." if len(held) > 3 else "")
        raise KitError(f"--out {out}: holds files that are not a kit ({shown}); {how}", 2)
    return True


def place(staging: Path, out: Path, replaces_kit: bool) -> None:
    """``staging`` renamed to ``out``: onto an empty folder (the rename fails if it filled meanwhile), or
    in place of the previous kit, moved aside first and removed once the new one is there."""
    old = Path(tempfile.mkdtemp(prefix=".gpukit-old-", dir=out.parent))
    try:
        if replaces_kit and check_out(out):  # still a kit
            out.rename(old / "kit")
        try:
            staging.rename(out)
        except OSError as err:
            if (old / "kit").exists():
                (old / "kit").rename(out)
            raise KitError(f"--out {out}: cannot put the kit there ({err.strerror}); nothing written", 2) from None
    finally:
        shutil.rmtree(old)


def limit_mib(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise KitError(f"--limit-mib {text!r}: give a positive number of MiB", 2)
    return value


def skipped_names(text: str, always: set[str]) -> set[str]:
    """``--skip``'s names and patterns; none may name what is always carried."""
    skip = {canonicalize_name(s.strip()) for s in text.split(",") if s.strip()}
    for pattern in sorted(skip):
        if not re.fullmatch(r"[a-z0-9*][a-z0-9.*_-]*", pattern):
            raise KitError(f"--skip {pattern!r}: not a package name or a name pattern with *", 2)
        covered = sorted(name for name in always if never_carried(name, {pattern}))
        if covered:
            raise KitError(f"--skip {pattern!r} leaves out {', '.join(covered)}, always carried: pip's build of the "
                           "project finds its backend only in the kit", 2)
    return skip


def build(args: argparse.Namespace) -> list[str]:
    out: Path = args.out
    replaces_kit = check_out(out)
    if args.wheels is not None and (problem := folder_problem(args.wheels)) is not None:
        raise KitError(f"--wheels {args.wheels}: {problem}", 2)
    target = load_target(args)
    reference = check_reference(args.reference) if args.reference else None  # before anything is downloaded
    always = {canonicalize_name(Requirement(r).name) for r in BUILD_REQUIREMENTS}
    skip = skipped_names(args.skip, always)
    limit = limit_mib(args.limit_mib)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".gpukit-", dir=out.parent))
    try:
        res = resolve(project_requirements(), target, skip, Pip(target.python, args.wheels), staging / "wheels",
                      always)
        wheels = sorted(res.chosen.values(), key=lambda p: p.name.lower())
        size = sum(w.stat().st_size for w in wheels)
        if size > limit * 2**20:
            largest = sorted(wheels, key=lambda w: -w.stat().st_size)[:4]
            raise KitError(
                f"the kit would be {mib(size)}, over its {limit:g} MiB limit; largest: "
                + ", ".join(f"{parse_wheel_filename(w.name)[0]} {mib(w.stat().st_size)}" for w in largest)
                + ". Leave out what the target holds (--have its pip list, or --skip NAME), or raise --limit-mib "
                "where nothing limits what is carried", 2)
        lines = [f"target: CPython {target.python} (cp{target.python.replace('.', '')}), manylinux x86_64",
                 f"python: {target.python}",
                 f"have: {target.source} ({len(target.held)} packages); held there, not carried: "
                 + (", ".join(sorted(res.held)) or "none"),
                 f"never carried: {', '.join([*NEVER_CARRIED, *sorted(skip)])}",
                 f"pyproject: {hashlib.sha256((PROJECT / 'pyproject.toml').read_bytes()).hexdigest()}"]
        if reference is not None:
            copy_reference(*reference, staging / "reference" / "unet3d")
            lines.append(f"reference: {args.reference} {REFERENCE_PATH} at {reference[1]}")
        else:
            lines.append("reference: none (gpu_session.sh's unet3d parts need it: --reference)")
        lines.append(f"wheels: {len(wheels)}, {mib(size)} (limit {limit:g} MiB)")
        lines += [f"  {w.name} {mib(w.stat().st_size)}" for w in wheels]
        (staging / "MANIFEST.txt").write_text("\n".join(lines) + "\n")
        place(staging, out, replaces_kit)  # the kit appears whole or not at all
    finally:
        if staging.exists():
            shutil.rmtree(staging)
    carried = ", ".join(parse_wheel_filename(w.name)[0] for w in wheels)
    return [lines[0], f"wheels: {len(wheels)}, {mib(size)}: {carried}", lines[-len(wheels) - 2]]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=PROJECT / ".gpukit", help="the kit's folder (default .gpukit)")
    parser.add_argument("--have", type=Path, default=IMAGE_PACKAGES,
                        help="the target's packages (pip list there); default: the lent GPU image, tools/gpu_image.txt")
    parser.add_argument("--python-version", default=None,
                        help="the target's Python, major.minor (default: what --have declares)")
    parser.add_argument("--skip", default="", help="comma-separated names to leave out besides --have's")
    parser.add_argument("--reference", default=None,
                        help="a local checkout or bare mirror of mlcommons/training (the unet3d reference)")
    parser.add_argument("--wheels", type=Path, default=None, help="take every wheel from this folder (no index)")
    parser.add_argument("--limit-mib", default=str(LIMIT_MIB),
                        help=f"refuse a kit larger than this (default {LIMIT_MIB:g}: 64 MiB carried, less the project)")
    args = parser.parse_args(argv)
    try:
        summary = build(args)
    except KitError as err:
        sys.stderr.write(f"gpu_kit: {err}\n")
        return err.code
    sys.stdout.write("\n".join(summary) + f"\nkit ready: {args.out}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
