"""What the kit's target holds (tools/gpu_kit.py): its interpreter and its packages, read from a pip list;
the error every part of the kit raises (exit 2 for bad input, 3 for pip or git)."""

from __future__ import annotations

import errno
import os
import re
import stat
import sys
from dataclasses import dataclass
from pathlib import Path

try:
    from packaging.specifiers import SpecifierSet
    from packaging.utils import canonicalize_name
    from packaging.version import InvalidVersion, Version
except ModuleNotFoundError:  # pragma: no cover - pip itself depends on packaging
    sys.stderr.write("gpu_kit: needs the packaging module: python3 -m pip install packaging\n")
    sys.exit(2)


class KitError(Exception):
    """A failure of pip or git (exit 3) or of the input (exit 2)."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


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


def kind_of(mode: int) -> str:
    """What a file of ``mode`` is, in words: the one wording of the kit's refusals."""
    return ("a file" if stat.S_ISREG(mode) else "a folder" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode)
            else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "a special file")


def folder_problem(path: Path) -> str | None:
    """Why ``path`` is not a folder ('no such folder', 'a FIFO, not a folder'), None when it is one."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "no such folder"
    except OSError as exc:
        return exc.strerror or str(exc)
    return None if stat.S_ISDIR(mode) else f"{kind_of(mode)}, not a folder"


def read_small_file(path: Path, max_bytes: int) -> bytes:
    """A regular file's bytes, at most ``max_bytes``: a FIFO or a device is refused unopened for reading
    (opened without blocking), a larger file by its size (OSError, with the reason as its strerror)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise OSError(errno.EINVAL, f"{kind_of(mode)}, not a file")
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
