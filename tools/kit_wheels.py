"""The wheels of the kit (tools/gpu_kit.py): what mltrain, its ``workloads`` extra and the test runner need
on the target, resolved one level of ``Requires-Dist`` at a time (markers evaluated for the target), less
what the target holds, downloaded by ``pip download --no-deps`` from an index or a local folder."""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from dataclasses import dataclass, field
from email.parser import Parser as EmailParser
from pathlib import Path

from kit_target import KitError, Target
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name, parse_wheel_filename

PROJECT = Path(__file__).resolve().parents[1]


# Never carried: the GPU machine's own CUDA stack is what is measured (CUDA's libraries are nvidia-cu*, e.g.
# nvidia-cublas, and nvidia-n*, e.g. nvidia-nccl; nvidia-ml-py, NVML's bindings, may travel).
NEVER_CARRIED = ("torch", "numpy", "triton", "nvidia-cu*", "nvidia-n*", "cuda-*")


# What gpu_session.sh installs beside the project: the test runner and its plug-ins (pytest-xdist: pyproject's
# addopts name its -n).
TEST_REQUIREMENTS = ("pytest>=8,<9.2", "pytest-timeout>=2.3", "pytest-xdist>=3.6", "hypothesis>=6")


# Always carried: pip's isolated build of the project finds its backend only in the kit.
BUILD_REQUIREMENTS = ("setuptools>=68", "wheel")


PLATFORMS = ("manylinux_2_39_x86_64", "manylinux_2_35_x86_64", "manylinux_2_34_x86_64", "manylinux_2_31_x86_64",
             "manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_24_x86_64", "manylinux_2_17_x86_64",
             "manylinux2014_x86_64", "manylinux1_x86_64", "linux_x86_64")


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
