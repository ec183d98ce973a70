"""How mltrain reads a file it is handed (a configuration file, a stored record, a log to import, a
facts file a job wrote): regular files only, and JSON through one bounded reader.

- Only a regular file is read (`open_regular`): opening a FIFO blocks until a writer comes, deaf to
  Ctrl-C (`import` of a folder holding one hung for good), and a device never ends. The file is
  opened without blocking and checked on its descriptor, so nothing can swap it in between.
- JSON (`parse_json`, `read_json`) is bounded in size and in depth: Python's decoder recurses, so a
  document nested 30,000 deep was a RecursionError ("internal error") in `list`, `qualify history`
  and `import`; a document deeper than any mltrain writes is refused, naming the file. The depth is
  measured without recursion; the decoder's own RecursionError is caught and said the same way.
- The bounds are in memory, not only on disk. A JSON document read whole takes up to 25 times its
  bytes as Python values (measured: an array of empty objects, 25.3x at its peak; numbers 5-9x),
  and a typed record copies them once more: a 249 MB manifest grew `list` to 11.6 GB. So each kind of
  file has its own bound, set here and nowhere else, and nothing is allocated before it is read
  (a buffer of the bound itself was 8 GiB for an accuracy log):

  ==================  =========================  ============================================
  kind                bound                      at most in memory, read whole and typed
  ==================  =========================  ============================================
  `RECORD_BYTES`      8 MiB: every stored record  ~400 MiB (mltrain's largest, a fleet's, is
                      (manifest, seed record,     tens of KiB; a manifest a few KiB)
                      summary, qualification)
  `TELEMETRY_BYTES`   128 MiB: a seed's series,   ~1.2 GiB for numbers (a day sampled each
                      a recorded GPU trace        second on 8 GPUs is ~60 MB)
  `SMALL_BYTES`       1 MiB: a file of a few      ~50 MiB (scaling.json, mltrain.json of an
                      fields                      export, a lock, a facts file, harness.json)
  `ACCURACY_*`        an accuracy log: streamed   one response at a time (`iter_json_array`):
                      entry by entry, each entry  ~3x `ACCURACY_ENTRY_BYTES` at worst, however
                      at most 1 GiB               long the log
  ==================  =========================  ============================================

Errors are `UnreadableFile` (an OSError: every reader that names an unreadable file names these
too) and `JsonProblem` (a ValueError), each one line; the caller turns them into its own error
class (a damaged record, a bad configuration file, a log that cannot be imported).
"""

from __future__ import annotations

import codecs
import contextlib
import json
import os
import re
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

import pydantic_core

MIB = 2**20
RECORD_BYTES = 8 * MIB
"""The largest stored record read (`orchestrator.results.record_reader`): manifests, seed records,
summaries, decisions, inference and qualification records. mltrain's largest are tens of KiB."""
TELEMETRY_BYTES = 128 * MIB
"""The largest telemetry series (or recorded GPU trace) read: a day sampled each second on 8 GPUs is
about 60 MB."""
SMALL_BYTES = MIB
"""The largest file of a few fields read: scaling.json, an export's mltrain.json, a lock, a facts
file a job wrote (harness.json, a data marker)."""
ACCURACY_LOG_BYTES = 64 * 2**30
"""The longest LoadGen accuracy log read: it is streamed (`iter_json_array`), so this bounds the time
spent, not the memory."""
ACCURACY_ENTRY_BYTES = 2**30
"""The largest response in an accuracy log (3D-UNet's are whole segmentations as hex: tens of MB)."""
MAX_JSON_BYTES = RECORD_BYTES
"""`read_json`'s bound where its caller names none: a stored record's."""
MAX_JSON_DEPTH = 64
"""The deepest JSON read: mltrain's records nest fewer than ten levels; Python's decoder fails near
1,000 (its recursion limit), and what is read is walked again (validated, compared, printed)."""
_CHUNK = MIB
"""What is read at a time where a file is read in steps."""


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


def not_a_folder(path: Path) -> str | None:
    """Why ``path`` is not a folder ('no such folder', 'a file, not a folder', 'a character device,
    not a folder', a loop of links), None when it is one: what a folder given as input is called."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "no such folder"
    except OSError as exc:
        return exc.strerror or str(exc)
    return None if stat.S_ISDIR(mode) else f"{what_is(mode, NOT_PLAIN)}, not a folder"


@contextlib.contextmanager
def open_regular(path: Path, *, max_bytes: int | None = None) -> Iterator[IO[bytes]]:
    """``path`` opened for reading in binary, once it is known to be a regular file (at most
    ``max_bytes`` long). OSError (FileNotFoundError, PermissionError, UnreadableFile) otherwise."""
    fd, _ = _open_regular_fd(path, max_bytes)
    try:
        os.set_blocking(fd, True)
        handle = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    with handle:
        yield handle


def _open_regular_fd(path: Path | str, max_bytes: int | None) -> tuple[int, os.stat_result]:
    """``path`` opened without waiting (a FIFO opens at once), and its status, once its descriptor is
    known to be a regular file of at most ``max_bytes``; closed again and UnreadableFile where it is not."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UnreadableFile(Path(path), f"{what_is(info.st_mode, NOT_PLAIN)}, not a regular file")
        if max_bytes is not None and info.st_size > max_bytes:
            raise UnreadableFile(Path(path), f"{info.st_size:,} bytes, larger than the {max_bytes:,} read")
    except BaseException:
        os.close(fd)
        raise
    return fd, info


def read_regular(path: Path | str, *, max_bytes: int) -> bytes:
    """The bytes of a regular file of at most ``max_bytes`` (see `open_regular`: the same checks).
    Only what the file holds is allocated, never the bound: a file that grows while it is read is read
    on in steps. Four system calls for a small file (open, fstat, read, close; nine through
    `open_regular`'s buffered file): a first listing reads one such file per run, 10,000 runs and more."""
    return read_regular_stat(path, max_bytes=max_bytes)[0]


def read_regular_stat(path: Path | str, *, max_bytes: int) -> tuple[bytes, os.stat_result]:
    """`read_regular`'s bytes, and the file's status as its descriptor had it before the read (its
    time with no system call of its own)."""
    fd, info = _open_regular_fd(path, max_bytes)
    size = info.st_size
    try:
        parts = [os.read(fd, size + 1)]  # a regular file's read never waits (O_NONBLOCK aside)
        read = len(parts[0])
        if read != size:  # a short read, or a file that changed since it was measured: read to its end
            while read <= max_bytes and (part := os.read(fd, min(_CHUNK, max_bytes + 1 - read))):
                parts.append(part)
                read += len(part)
    finally:
        os.close(fd)
    data = parts[0] if len(parts) == 1 else b"".join(parts)
    if len(data) > max_bytes:
        raise UnreadableFile(Path(path), f"larger than the {max_bytes:,} bytes read")
    return data, info


def parse_json(text: str | bytes, *, max_depth: int = MAX_JSON_DEPTH, max_bytes: int = MAX_JSON_BYTES) -> Any:
    """A JSON document as Python values, or JsonProblem: larger than ``max_bytes``, nested deeper
    than ``max_depth``, or not JSON.

    Parsed by pydantic's parser (a third of the standard library's time: a first listing parses a file
    a run); a text it refuses is parsed again by the standard library's, whose verdict stands (it also
    reads UTF-16 and a byte-order mark, and names the problem in its own words). Where both parse a
    text, their values are equal (tests/core/test_json_parsing.py)."""
    if len(text) > max_bytes:
        raise JsonProblem(f"{len(text):,} bytes of JSON, more than the {max_bytes:,} read")
    if _text_depth_beyond(text, max_depth):  # before the decoder, which recurses
        raise JsonProblem(f"JSON nested deeper than {max_depth} levels")
    with contextlib.suppress(ValueError):
        return pydantic_core.from_json(text)
    try:
        return json.loads(text)
    except RecursionError:
        raise JsonProblem(f"JSON nested deeper than {max_depth} levels") from None
    except ValueError as exc:  # JSONDecodeError, and UnicodeDecodeError for bytes
        raise JsonProblem(f"not JSON ({' '.join(str(exc).split())[:120]})") from None


def read_json(path: Path | str, *, max_depth: int = MAX_JSON_DEPTH, max_bytes: int = MAX_JSON_BYTES) -> Any:
    """A JSON file's document: a regular file (`read_regular`), parsed by `parse_json`. OSError for
    a file that cannot be read, JsonProblem for one that is not JSON within bounds (the caller names
    the file, in the words of its own error)."""
    return parse_json(read_regular(path, max_bytes=max_bytes), max_depth=max_depth, max_bytes=max_bytes)


def iter_json_array(path: Path, *, max_bytes: int, max_item_bytes: int, max_depth: int = MAX_JSON_DEPTH,
                    chunk: int = _CHUNK) -> Iterator[Any]:
    """The items of a file holding one JSON array, one at a time, read in steps of ``chunk`` bytes:
    the memory held is about one item (at most ``max_item_bytes``), however long the file (at most
    ``max_bytes``). OSError for a file that cannot be read, JsonProblem where it is not such an
    array within the bounds (each item nested at most ``max_depth - 1`` deep)."""
    with open_regular(path, max_bytes=max_bytes) as handle:
        yield from _array_items(iter(lambda: handle.read(chunk), b""), max_item_bytes, max_depth, chunk)


def _array_items(chunks: Iterable[bytes], max_item_bytes: int, max_depth: int, chunk: int = _CHUNK) -> Iterator[Any]:
    decoder = json.JSONDecoder()
    utf8 = codecs.getincrementaldecoder("utf-8")()
    source = iter(chunks)
    text, at, ended = "", 0, False

    def more(wanted: int) -> None:
        """Read on until ``wanted`` characters lie beyond ``at`` (or the file ends)."""
        nonlocal text, at, ended
        text = text[at:]
        at = 0
        parts = [text]
        held = len(text)
        while not ended and held < wanted:
            try:
                part = utf8.decode(next(source))
            except StopIteration:
                part, ended = utf8.decode(b"", final=True), True
            except UnicodeDecodeError as exc:
                raise JsonProblem(f"not JSON ({exc.reason})") from None
            parts.append(part)
            held += len(part)
        text = "".join(parts)

    def skip_space() -> str:
        """The next character that is not white space ('' at the end)."""
        nonlocal at
        while True:
            while at < len(text) and text[at] in " \t\r\n":
                at += 1
            if at < len(text) or ended:
                return text[at] if at < len(text) else ""
            more(1)

    if skip_space() != "[":
        raise JsonProblem("not JSON (an array was expected)")
    at += 1
    first = True
    while True:
        mark = skip_space()
        if mark == "]":
            at += 1
            if skip_space():
                raise JsonProblem("not JSON (extra data after the array)")
            return
        if not first:
            if mark != ",":
                raise JsonProblem(f"not JSON (',' or ']' expected, {mark[:1]!r} found)")
            at += 1
            skip_space()
        first = False
        while True:
            try:
                item, end = decoder.raw_decode(text, at)
            except RecursionError:
                raise JsonProblem(f"JSON nested deeper than {max_depth} levels") from None
            except ValueError as exc:
                if ended:
                    raise JsonProblem(f"not JSON ({' '.join(str(exc).split())[:120]})") from None
                item, end = None, -1
            if end != -1 and (ended or len(text) - end >= (3 if isinstance(item, int | float) else 1)):
                break  # a number followed by fewer than 3 characters read may go on (1 | .5, 2 | e+3)
            if len(text) - at > max_item_bytes:
                raise JsonProblem(f"an item of more than {max_item_bytes:,} bytes of JSON, more than is read")
            more(len(text) - at + max(chunk, (len(text) - at) // 2))  # 1.5 times: each byte decoded O(1) times
        if _depth_beyond(item, max_depth - 1):
            raise JsonProblem(f"JSON nested deeper than {max_depth} levels")
        if end - at > max_item_bytes:
            raise JsonProblem(f"an item of more than {max_item_bytes:,} bytes of JSON, more than is read")
        at = end
        yield item


_STRINGS = {str: re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL), bytes: re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)}
_BRACKETS = {str: re.compile(r"[\[\]{}]"), bytes: re.compile(rb"[\[\]{}]")}
_OPENING = {str: ("[", "{"), bytes: (b"[", b"{")}


def _text_depth_beyond(text: str | bytes, limit: int) -> bool:
    """Whether the JSON text ``text`` nests deeper than ``limit``, told from its brackets outside its
    strings, without decoding it: in one count where it has fewer opening brackets than ``limit``
    (most records), else in one pass over its brackets."""
    kind = bytes if isinstance(text, bytes | bytearray) else str
    opening = _OPENING[kind]
    if text.count(opening[0]) + text.count(opening[1]) <= limit:  # type: ignore[arg-type]
        return False
    depth = 0
    for bracket in _BRACKETS[kind].finditer(_STRINGS[kind].sub(opening[0][:0], text)):  # type: ignore[arg-type]
        if bracket.group() in opening:
            depth += 1
            if depth > limit:
                return True
        else:
            depth -= 1
    return False


def _depth_beyond(value: Any, limit: int) -> bool:
    """Whether ``value`` nests deeper than ``limit``, walked without recursion and holding one
    iterator per level (never a copy of every child: the walk of a large array costs no memory)."""
    if not isinstance(value, dict | list):
        return False
    stack: list[Iterator[Any]] = [iter(value.values() if isinstance(value, dict) else value)]
    while stack:
        if len(stack) > limit:
            return True
        for child in stack[-1]:
            if isinstance(child, dict | list):
                stack.append(iter(child.values() if isinstance(child, dict) else child))
                break
        else:
            stack.pop()
    return False
