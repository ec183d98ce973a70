"""mlperf_logging's log parser in linear time, with its output unchanged.

Every ruleset's parser (`mlp_parser.ruleset_*`) first strips what precedes the MLLOG token of each
line with ``re.sub(".*" + TOKEN, TOKEN, line)``. After its one match the regex engine tries every
later position of the line again, each try running to the line's end: time quadratic in a line's
length. One MLLOG line of 60 kB (a value nested 30,000 deep) took the compliance checker about 10 s
of CPU; one of a few megabytes would hold a seed's scoring for hours, with stop signals held.

`linear_prefix_strip` is that substitution done by ``str.rfind``: within each run of characters
that ``.`` matches (all but a newline), everything before the last token goes. `tests/mlperf/
test_line_prefix.py` holds it equal to the package's own substitution on many lines. While
`stripped_in_linear_time` is active the package's parsers call it instead of theirs (their
``strip_and_dedup``, put back on exit); the token stays each ruleset's own (0.6.0 has a shorter
one). Nothing the parser keeps, drops or reports differs.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable, Iterable, Iterator
from types import ModuleType


def linear_prefix_strip(line: str, token: str) -> str:
    """``re.sub(".*" + token, token, line)`` for a token free of regex metacharacters, in linear time."""
    pieces = line.split("\n")
    return "\n".join(piece[piece.rfind(token):] if token in piece else piece for piece in pieces)


def _strip_and_dedup_for(module: ModuleType) -> Callable[[Iterable[str]], list[str]]:
    """The ruleset module's ``strip_and_dedup`` (keep the lines holding its token, each stripped to
    start at it), in linear time."""

    def strip_and_dedup(lines: Iterable[str]) -> list[str]:
        token: str = module.TOKEN
        return [linear_prefix_strip(line, token) for line in lines if token in line]

    return strip_and_dedup


def ruleset_parsers() -> list[ModuleType]:
    """Every ruleset parser module mlperf_logging has."""
    from mlperf_logging.compliance_checker import mlp_parser

    modules = {getattr(mlp_parser, name).__module__ for name in dir(mlp_parser) if name.startswith("parse_file_")}
    return [importlib.import_module(name) for name in sorted(modules)]


@contextlib.contextmanager
def stripped_in_linear_time() -> Iterator[None]:
    """mlperf_logging's parsers strip line prefixes by `linear_prefix_strip` within the block."""
    modules = [module for module in ruleset_parsers() if hasattr(module, "strip_and_dedup")]
    saved = [(module, module.strip_and_dedup) for module in modules]
    try:
        for module in modules:
            module.strip_and_dedup = _strip_and_dedup_for(module)
        yield
    finally:
        for module, original in saved:
            module.strip_and_dedup = original
