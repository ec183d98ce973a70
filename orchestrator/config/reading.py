"""How mltrain reads a file it is handed (a configuration file, a stored record, a log to import, a
facts file a job wrote): regular files only, and JSON through one bounded reader.

- Only a regular file is read (`open_regular`): opening a FIFO blocks until a writer comes, deaf to
  Ctrl-C (`import` of a folder holding one hung for good), and a device never ends. The file is
  opened without blocking and checked on its descriptor, so nothing can swap it in between.
- JSON (`parse_json`, `read_json`) is bounded in size and in depth: Python's decoder recurses, so a
  document nested 30,000 deep was a RecursionError ("internal error") in `list`, `qualify history`
  and `import`; a document deeper than any mltrain writes is refused, naming the file.

Errors are `UnreadableFile` (an OSError: every reader that names an unreadable file names these
too) and `JsonProblem` (a ValueError), each one line; the caller turns them into its own error
class (a damaged record, a bad configuration file, a log that cannot be imported).
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

MAX_JSON_BYTES = 256 * 2**20
"""The largest JSON file read (the largest mltrain writes, a long run's telemetry, is a few MiB)."""
MAX_JSON_DEPTH = 64
"""The deepest JSON read: mltrain's records nest fewer than ten levels; Python's decoder fails near
1,000 (its recursion limit), and what is read is walked again (validated, compared, printed)."""


NOT_PLAIN = "not a plain file"
"""What a reader (and an output check) calls a mode of no known kind."""


class UnreadableFile(OSError):
    """A path that is not a regular file this process may read, or one too large; its line names why."""

    def __init__(self, path: Path, why: str) -> None:
        super().__init__(why)
        self.strerror = why
        self.filename = str(path)

    def __str__(self) -> str:
        return f"{self.filename}: {self.strerror}"


class JsonProblem(ValueError):
    """Text that is not a JSON document within the bounds; its line says why."""


_KINDS = ((stat.S_ISREG, "a file"), (stat.S_ISLNK, "a symbolic link"), (stat.S_ISDIR, "a folder"),
          (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"))


def what_is(mode: int, unknown: str = "an unknown kind of file") -> str:
    """What a file of ``mode`` (``st_mode``) is, in words ('a FIFO', 'a folder'); ``unknown`` for a
    mode of none of these kinds. The one wording of every reader and writer."""
    return next((word for test, word in _KINDS if test(mode)), unknown)


def check_regular(path: Path) -> None:
    """UnreadableFile unless ``path`` (its link followed) is a regular file; FileNotFoundError where
    nothing is there. Only ``stat``: nothing is opened."""
    mode = os.stat(path).st_mode
    if not stat.S_ISREG(mode):
        raise UnreadableFile(path, f"{what_is(mode, NOT_PLAIN)}, not a regular file")


def not_a_file(path: Path) -> str | None:
    """Why ``path`` is not a regular file one may read ('no such file', 'a folder, not a regular
    file'), None when it is one."""
    try:
        check_regular(path)
    except FileNotFoundError:
        return "no such file"
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


@contextlib.contextmanager
def open_regular(path: Path, *, max_bytes: int | None = None) -> Iterator[IO[bytes]]:
    """``path`` opened for reading in binary, once it is known to be a regular file (at most
    ``max_bytes`` long). OSError (FileNotFoundError, PermissionError, UnreadableFile) otherwise."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # a FIFO opens at once: never waits
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UnreadableFile(path, f"{what_is(info.st_mode, NOT_PLAIN)}, not a regular file")
        if max_bytes is not None and info.st_size > max_bytes:
            raise UnreadableFile(path, f"{info.st_size:,} bytes, larger than the {max_bytes:,} read")
        os.set_blocking(fd, True)
        handle = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    with handle:
        yield handle


def read_regular(path: Path, *, max_bytes: int) -> bytes:
    """The bytes of a regular file of at most ``max_bytes`` (see `open_regular`)."""
    with open_regular(path, max_bytes=max_bytes) as handle:
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:  # it grew since it was measured
        raise UnreadableFile(path, f"larger than the {max_bytes:,} bytes read")
    return data


def parse_json(text: str | bytes, *, max_depth: int = MAX_JSON_DEPTH, max_bytes: int = MAX_JSON_BYTES) -> Any:
    """A JSON document as Python values, or JsonProblem: larger than ``max_bytes``, nested deeper
    than ``max_depth``, or not JSON."""
    if len(text) > max_bytes:
        raise JsonProblem(f"{len(text):,} bytes of JSON, more than the {max_bytes:,} read")
    try:
        value = json.loads(text)
    except RecursionError:
        raise JsonProblem(f"JSON nested deeper than {max_depth} levels") from None
    except ValueError as exc:  # JSONDecodeError, and UnicodeDecodeError for bytes
        raise JsonProblem(f"not JSON ({' '.join(str(exc).split())[:120]})") from None
    if _depth_beyond(value, max_depth):
        raise JsonProblem(f"JSON nested deeper than {max_depth} levels")
    return value


def read_json(path: Path, *, max_depth: int = MAX_JSON_DEPTH, max_bytes: int = MAX_JSON_BYTES) -> Any:
    """A JSON file's document: a regular file (`read_regular`), parsed by `parse_json`. OSError for
    a file that cannot be read, JsonProblem for one that is not JSON within bounds (the caller names
    the file, in the words of its own error)."""
    return parse_json(read_regular(path, max_bytes=max_bytes), max_depth=max_depth, max_bytes=max_bytes)


def _depth_beyond(value: Any, limit: int) -> bool:
    """Whether ``value`` nests deeper than ``limit`` (walked without recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False
