"""Make, on a machine with PyPI, the kit a bare GPU machine needs for `benchmarks/gpu_session.sh`.

    python tools/gpu_kit.py --out .gpukit --python-version 3.12 --reference /path/to/mlcommons/training
    python tools/gpu_kit.py --out .gpukit --python-version 3.12 --skip scipy,pandas,matplotlib  # smaller

A GPU machine that cannot reach an index typically has CUDA torch and numpy and little else. The
kit is a folder of two things:

- ``wheels/``: every wheel mltrain, its ``workloads`` extra and the test runner need, resolved for
  the target interpreter (``--python-version``, CPython, manylinux x86_64), torch, numpy, CUDA's own
  packages and triton left out (the GPU machine's CUDA build stays the one used). ``--skip`` leaves
  out more names the target is known to hold already (to keep the kit small enough to carry);
  ``gpu_session.sh`` lets pip resolve against what is installed, so a skipped name the target lacks
  is a pip error naming it, not a silent gap;
- ``reference/unet3d``: the MLPerf reference implementation's unet3d (mlcommons/training
  ``retired_benchmarks/unet3d/pytorch``) at the commit ``MANIFEST.txt`` records, from a local
  checkout, a bare mirror or a clone URL. It is read at run time by
  ``benchmarks/unet3d_gpu_throughput.py`` and is never committed.

``MANIFEST.txt`` lists the wheels, their total size, the target, the reference's commit and the
SHA-256 of the pyproject.toml they were resolved for (`gpu_session.sh` refuses a kit made for another). Exit 0
when the kit is complete, 2 on bad input (one line), 3 when pip or git failed (their output shown).
"""

from __future__ import annotations

import argparse
import hashlib
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
REFERENCE_PATH = "retired_benchmarks/unet3d/pytorch"
DEFAULT_REFERENCE_URL = "https://github.com/mlcommons/training"
# Never carried: the GPU machine's own CUDA stack is what is measured.
ALWAYS_LEFT_OUT = ("torch", "numpy", "triton")
# What gpu_session.sh installs beside the project: the test runner and its plug-ins.
TEST_REQUIREMENTS = ("pytest>=8", "pytest-timeout>=2.3", "hypothesis>=6")
BUILD_REQUIREMENTS = ("setuptools>=68", "wheel")  # the build backend, for pip's isolated build
PLATFORMS = ("manylinux_2_34_x86_64", "manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64",
             "manylinux2014_x86_64", "manylinux1_x86_64")


class KitError(Exception):
    """A failure of pip or git (exit 3) or of the input (exit 2)."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def project_requirements() -> list[str]:
    """The project's dependencies and its ``workloads`` extra, read from pyproject.toml, torch left out."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    meta = tomllib.loads((PROJECT / "pyproject.toml").read_text())["project"]
    wanted = [*meta["dependencies"], *meta["optional-dependencies"]["workloads"]]
    return [r for r in wanted if normalized(re.split(r"[<>=!~ ;\[]", r, maxsplit=1)[0]) != "torch"]


def wheel_name(path: Path) -> str:
    return normalized(path.name.split("-", 1)[0])


def left_out(name: str, skip: set[str]) -> bool:
    patterns = [*ALWAYS_LEFT_OUT, *skip]
    return any(re.fullmatch(normalized(p).replace("*", ".*"), name) for p in patterns)


def run(cmd: list[str], what: str) -> str:
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise KitError(f"{what} failed (exit {done.returncode}):\n{done.stdout[-2000:]}{done.stderr[-4000:]}", 3)
    return done.stdout


def download_wheels(dest: Path, python_version: str, skip: set[str]) -> list[Path]:
    dest.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--only-binary=:all:",
           "--implementation", "cp", "--python-version", python_version, "--dest", str(dest)]
    for platform in PLATFORMS:
        cmd += ["--platform", platform]
    run([*cmd, *project_requirements(), *TEST_REQUIREMENTS, *BUILD_REQUIREMENTS], "pip download")
    kept = []
    for wheel in sorted(dest.glob("*.whl")):
        if left_out(wheel_name(wheel), skip):
            wheel.unlink()
        else:
            kept.append(wheel)
    return kept


def copy_reference(source: str, dest: Path) -> str:
    """Copy the reference's unet3d folder out of a git repository (a path or a URL); return its commit."""
    with tempfile.TemporaryDirectory(prefix="mltrain-ref-") as scratch:
        repo = source
        if not Path(source).exists():
            repo = str(Path(scratch) / "training")
            run(["git", "clone", "--quiet", "--depth", "1", "--no-checkout", source, repo], f"git clone {source}")
        commit = run(["git", "-C", repo, "rev-parse", "HEAD"], "git rev-parse").strip()
        archive = Path(scratch) / "ref.tar"
        run(["git", "-C", repo, "archive", "--output", str(archive), commit, REFERENCE_PATH],
            f"git archive of {REFERENCE_PATH}")
        unpacked = Path(scratch) / "unpacked"
        unpacked.mkdir()
        run(["tar", "-xf", str(archive), "-C", str(unpacked)], "tar")
        if dest.exists():
            shutil.rmtree(dest)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(unpacked / REFERENCE_PATH), dest)
    return commit


def build(args: argparse.Namespace) -> str:
    if not re.fullmatch(r"3\.\d{1,2}", args.python_version):
        raise KitError(f"--python-version {args.python_version!r}: give major.minor, e.g. 3.12", 2)
    out: Path = args.out
    if out.exists() and not out.is_dir():
        raise KitError(f"--out {out}: is a file; name a folder", 2)
    staging = Path(tempfile.mkdtemp(prefix=".gpukit-", dir=out.parent if out.parent.exists() else None))
    try:
        skip = {s.strip() for s in args.skip.split(",") if s.strip()}
        wheels = download_wheels(staging / "wheels", args.python_version, skip)
        lines = [f"target: CPython {args.python_version}, manylinux x86_64",
                 f"left out: {', '.join([*ALWAYS_LEFT_OUT, *sorted(skip)])}",
                 f"pyproject: {hashlib.sha256((PROJECT / 'pyproject.toml').read_bytes()).hexdigest()}"]
        if args.reference:
            commit = copy_reference(args.reference, staging / "reference" / "unet3d")
            lines.append(f"reference: {args.reference} {REFERENCE_PATH} at {commit}")
        else:
            lines.append("reference: none (the unet3d benchmark beside the reference will be skipped)")
        size = sum(w.stat().st_size for w in wheels)
        lines.append(f"wheels: {len(wheels)}, {size / 2**20:.1f} MiB")
        lines += [f"  {w.name}" for w in wheels]
        (staging / "MANIFEST.txt").write_text("\n".join(lines) + "\n")
        if out.exists():
            shutil.rmtree(out)
        staging.rename(out)  # the kit appears whole or not at all
    finally:
        if staging.exists():
            shutil.rmtree(staging)
    return f"{lines[0]}; {lines[-len(wheels) - 1]}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=PROJECT / ".gpukit", help="the kit's folder (default .gpukit)")
    parser.add_argument("--python-version", default=f"{sys.version_info.major}.{sys.version_info.minor}",
                        help="the GPU machine's Python, major.minor (default: this one's)")
    parser.add_argument("--skip", default="", help="comma-separated names the target already holds")
    parser.add_argument("--reference", default=None,
                        help=f"a checkout, bare mirror or URL of mlcommons/training (e.g. {DEFAULT_REFERENCE_URL})")
    args = parser.parse_args(argv)
    try:
        summary = build(args)
    except KitError as err:
        sys.stderr.write(f"gpu_kit: {err}\n")
        return err.code
    sys.stdout.write(f"{summary}\nkit ready: {args.out}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
