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
"""

from __future__ import annotations

import argparse
import errno
import hashlib
import math
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass, field
from email.parser import Parser as EmailParser
from pathlib import Path

try:
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.specifiers import SpecifierSet
    from packaging.utils import canonicalize_name, parse_wheel_filename
    from packaging.version import InvalidVersion, Version
except ModuleNotFoundError:  # pragma: no cover - pip itself depends on packaging
    sys.stderr.write("gpu_kit: needs the packaging module: python3 -m pip install packaging\n")
    sys.exit(2)

PROJECT = Path(__file__).resolve().parents[1]
IMAGE_PACKAGES = PROJECT / "tools" / "gpu_image.txt"
REFERENCE_PATH = "retired_benchmarks/unet3d/pytorch"
REFERENCE_URL = "https://github.com/mlcommons/training"
LIMIT_MIB = 60.0
# Never carried: the GPU machine's own CUDA stack is what is measured (CUDA's libraries are nvidia-cu*, e.g.
# nvidia-cublas, and nvidia-n*, e.g. nvidia-nccl; nvidia-ml-py, NVML's bindings, may travel).
NEVER_CARRIED = ("torch", "numpy", "triton", "nvidia-cu*", "nvidia-n*", "cuda-*")
# What gpu_session.sh installs beside the project: the test runner and its plug-ins.
TEST_REQUIREMENTS = ("pytest>=8", "pytest-timeout>=2.3", "hypothesis>=6")
# Always carried: pip's isolated build of the project finds its backend only in the kit.
BUILD_REQUIREMENTS = ("setuptools>=68", "wheel")
PLATFORMS = ("manylinux_2_39_x86_64", "manylinux_2_35_x86_64", "manylinux_2_34_x86_64", "manylinux_2_31_x86_64",
             "manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_24_x86_64", "manylinux_2_17_x86_64",
             "manylinux2014_x86_64", "manylinux1_x86_64", "linux_x86_64")


class KitError(Exception):
    """A failure of pip or git (exit 3) or of the input (exit 2)."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


# ---- what the target holds -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """The interpreter the kit is for and the packages it already holds."""

    python: str
    """major.minor"""
    held: dict[str, Version | None]
    """Canonical name -> installed version (None: not known, taken as satisfying)."""
    source: str
    """Where the list came from, for the manifest."""

    def markers(self) -> dict[str, str]:
        """The environment markers of ``Requires-Dist`` lines, evaluated as on the target."""
        return {"python_version": self.python, "python_full_version": f"{self.python}.0",
                "implementation_name": "cpython", "platform_python_implementation": "CPython",
                "implementation_version": f"{self.python}.0", "sys_platform": "linux",
                "platform_system": "Linux", "platform_machine": "x86_64", "os_name": "posix", "extra": ""}

    def holds(self, name: str, spec: SpecifierSet) -> bool:
        if name not in self.held:
            return False
        version = self.held[name]
        return version is None or spec.contains(version, prereleases=True)


HAVE_MAX_BYTES = 4 * 2**20
"""A pip list is some kilobytes; more is not one."""


def read_small_file(path: Path, max_bytes: int) -> bytes:
    """A regular file's bytes, at most ``max_bytes``: a FIFO or a device is refused unopened for reading
    (opened without blocking), a larger file by its size (OSError, with the reason as its strerror)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = "a FIFO" if stat.S_ISFIFO(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) \
            else "a folder" if stat.S_ISDIR(mode) else "not a regular file"
        raise OSError(errno.EINVAL, f"{kind}, not a file")
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise OSError(errno.EFBIG, f"over {max_bytes // 2**20} MiB: not a package list")
    return data


PACKAGE_LINE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\s*(?:==|\s)\s*([^\s;#]+))?")


def read_have(path: Path) -> tuple[dict[str, Version | None], str | None]:
    """A package list: ``pip list --format=freeze`` (name==version), ``pip list``'s columns, or names;
    ``# python: X.Y`` declares the interpreter. Returns (held packages, declared python or None)."""
    try:
        text = read_small_file(path, HAVE_MAX_BYTES).decode("utf-8")
    except (OSError, UnicodeDecodeError) as err:
        why = err.strerror if isinstance(err, OSError) else err
        raise KitError(f"--have {path}: cannot read it ({why})", 2) from None
    held: dict[str, Version | None] = {}
    python = None
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        declared = re.fullmatch(r"#\s*python:\s*(\S+)", line)
        if declared:
            python = declared.group(1)
            continue
        if not line or line.startswith("#") or line.startswith("-") or line.lower().startswith("package "):
            continue
        if " @ " in line:  # name @ file:///... (pip freeze of a local install)
            held[canonicalize_name(line.split(" @ ", 1)[0])] = None
            continue
        match = PACKAGE_LINE.match(line)
        if not match:
            raise KitError(f"--have {path}:{number}: {raw!r} is not 'name', 'name==version' or pip list's columns", 2)
        version = None
        if match.group(2):
            try:
                version = Version(match.group(2))
            except InvalidVersion:
                version = None
        held[canonicalize_name(match.group(1))] = version
    if not held:
        raise KitError(f"--have {path}: no packages in it (give the output of pip list on the target)", 2)
    return held, python


# ---- resolving, one level of Requires-Dist at a time --------------------------------------------------------


def never_carried(name: str, skip: set[str]) -> bool:
    return any(re.fullmatch(canonicalize_name(p).replace("*", ".*"), name) for p in (*NEVER_CARRIED, *skip))


def requirement(text: str, origin: str) -> Requirement:
    try:
        return Requirement(text)
    except InvalidRequirement as err:
        raise KitError(f"{origin}: {text!r}: {err}", 2) from None


def wheel_requirements(wheel: Path, extras: set[str], target: Target) -> list[Requirement]:
    """The ``Requires-Dist`` of ``wheel`` that apply on the target with ``extras`` asked for."""
    with zipfile.ZipFile(wheel) as archive:
        metadata = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA") and n.count("/") == 1)
        message = EmailParser().parsestr(archive.read(metadata).decode("utf-8"))
    wanted = []
    for line in message.get_all("Requires-Dist") or []:
        req = requirement(line, wheel.name)
        if req.marker is None or any(req.marker.evaluate({**target.markers(), "extra": e}) for e in ("", *extras)):
            wanted.append(req)
    return wanted


@dataclass
class Resolution:
    """What the kit carries, what the target holds, and why each name is wanted."""

    specs: dict[str, SpecifierSet] = field(default_factory=dict)
    extras: dict[str, set[str]] = field(default_factory=dict)
    chosen: dict[str, Path] = field(default_factory=dict)
    held: set[str] = field(default_factory=set)
    read: dict[str, frozenset[str]] = field(default_factory=dict)
    """name -> the extras its metadata was last read with."""

    def want(self, req: Requirement) -> None:
        name = canonicalize_name(req.name)
        self.specs[name] = self.specs.get(name, SpecifierSet()) & req.specifier
        self.extras.setdefault(name, set()).update(req.extras)


class Pip:
    """``pip download --no-deps`` for the target, from an index or from a local folder alone."""

    def __init__(self, python: str, wheels: Path | None) -> None:
        self.python = python
        self.wheels = wheels

    def download(self, requirements: list[str], dest: Path) -> None:
        cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--no-deps",
               "--only-binary=:all:", "--implementation", "cp", "--python-version", self.python, "--dest", str(dest)]
        for platform in PLATFORMS:
            cmd += ["--platform", platform]
        if self.wheels is not None:
            cmd += ["--no-index", "--find-links", str(self.wheels)]
        done = subprocess.run([*cmd, *requirements], capture_output=True, text=True)
        if done.returncode != 0:
            errors = [line for line in done.stderr.splitlines() if line.startswith("ERROR")]
            raise KitError("pip download failed (exit {}): {}".format(
                done.returncode, " ".join(errors) or done.stderr[-2000:]), 3)


def resolve(roots: list[Requirement], target: Target, skip: set[str], pip: Pip, dest: Path,
            always: set[str]) -> Resolution:
    """Download, for the target, every wheel the ``roots`` need that the target does not hold."""
    dest.mkdir(parents=True, exist_ok=True)
    res = Resolution()
    for req in roots:
        if req.marker is None or req.marker.evaluate(target.markers()):
            res.want(req)
    while True:
        stale = [n for n, p in res.chosen.items() if not res.specs[n].contains(parse_wheel_filename(p.name)[1], True)]
        for name in stale:  # a later requirement excludes the version taken: take another
            res.chosen.pop(name).unlink()
        pending = []
        for name, spec in sorted(res.specs.items()):
            if name in res.chosen or name in res.held:
                continue
            if never_carried(name, skip) or (name not in always and target.holds(name, spec)):
                res.held.add(name)
            else:
                pending.append(name)
        if pending:
            before = set(dest.glob("*.whl"))
            sys.stderr.write(f"gpu_kit: downloading {len(pending)} for CPython {target.python}: {', '.join(pending)}\n")
            sys.stderr.flush()  # a line per round, also without a terminal
            pip.download([f"{n}{res.specs[n]}" for n in pending], dest)
            for wheel in set(dest.glob("*.whl")) - before:
                res.chosen[canonicalize_name(parse_wheel_filename(wheel.name)[0])] = wheel
            missing = [n for n in pending if n not in res.chosen]
            if missing:
                raise KitError(f"pip download left out {', '.join(missing)} (no wheel for the target?)", 3)
        unread = [n for n, p in res.chosen.items() if res.read.get(n) != frozenset(res.extras.get(n, ()))]
        if not pending and not stale and not unread:
            return res
        for name in unread:
            res.read[name] = frozenset(res.extras.get(name, ()))
            for req in wheel_requirements(res.chosen[name], res.extras.get(name, set()), target):
                res.want(req)


def project_requirements() -> list[Requirement]:
    """The project's dependencies and its ``workloads`` extra (pyproject.toml), the test runner, the build backend."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    meta = tomllib.loads((PROJECT / "pyproject.toml").read_text())["project"]
    texts = [*meta["dependencies"], *meta["optional-dependencies"]["workloads"], *TEST_REQUIREMENTS,
             *BUILD_REQUIREMENTS]
    return [requirement(t, "pyproject.toml") for t in texts]


# ---- the reference ---------------------------------------------------------------------------------------


def git(args: list[str], what: str) -> str:
    done = subprocess.run(["git", *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise KitError(f"{what} failed (exit {done.returncode}): {done.stderr.strip()[-1000:]}", 3)
    return done.stdout


def check_reference(source: str) -> tuple[Path, str]:
    """The repository and commit of a local checkout or bare mirror holding the reference's unet3d."""
    how = ("give a local checkout or bare mirror of mlcommons/training "
           f"(where GitHub is reachable: git clone --mirror {REFERENCE_URL})")
    if re.match(r"^[a-z][a-z0-9+.-]*://|^git@", source):
        raise KitError(f"--reference {source}: a URL; {how}", 2)
    repo = Path(source).expanduser()
    if not repo.is_dir():
        raise KitError(f"--reference {source}: no such folder; {how}", 2)
    probe = subprocess.run(["git", "-C", str(repo), "rev-parse", "--verify", "HEAD^{commit}"], capture_output=True,
                           text=True)
    if probe.returncode != 0:
        raise KitError(f"--reference {source}: not a git repository with a commit; {how}", 2)
    commit = probe.stdout.strip()
    inside = subprocess.run(["git", "-C", str(repo), "cat-file", "-e", f"{commit}:{REFERENCE_PATH}/model/unet3d.py"],
                            capture_output=True)
    if inside.returncode != 0:
        raise KitError(f"--reference {source}: its commit {commit[:12]} holds no {REFERENCE_PATH}/model/unet3d.py; "
                       "give mlcommons/training at a commit that has the retired unet3d", 2)
    return repo, commit


def copy_reference(repo: Path, commit: str, dest: Path) -> None:
    """The reference's unet3d folder at ``commit``, out of the repository (checkout or bare) into ``dest``."""
    with tempfile.TemporaryDirectory(prefix="mltrain-ref-") as scratch:
        archive = Path(scratch) / "ref.tar"
        git(["-C", str(repo), "archive", "--output", str(archive), commit, REFERENCE_PATH],
            f"git archive of {REFERENCE_PATH}")
        unpacked = Path(scratch) / "unpacked"
        unpacked.mkdir()
        subprocess.run(["tar", "-xf", str(archive), "-C", str(unpacked)], check=True)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(unpacked / REFERENCE_PATH), dest)


# ---- the kit ----------------------------------------------------------------------------------------------


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
    if args.wheels is not None and not args.wheels.is_dir():
        raise KitError(f"--wheels {args.wheels}: no such folder", 2)
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
