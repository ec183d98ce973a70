"""mlperf_logging's tools at their own output, in less time: two of their steps done the same way
by faster means, for the duration of a call (`faster_tools`).

1. **Line prefixes, in linear time.** Every ruleset's parser (`mlp_parser.ruleset_*`) first strips
   what precedes the MLLOG token of each line with ``re.sub(".*" + TOKEN, TOKEN, line)``. After its
   one match the regex engine tries every later position of the line again, each try running to
   the line's end: time quadratic in a line's length. One MLLOG line of 60 kB (a value nested
   30,000 deep) took about 10 s of CPU per read; one of a few megabytes would hold a seed's
   scoring for hours, with stop signals held. `linear_prefix_strip` is that substitution by
   ``str.rfind``: within each run of characters that ``.`` matches (all but a newline), everything
   before the last token goes. The token stays each ruleset's own (0.6.0 has a shorter one).
2. **Rule files, read by libyaml.** The compliance checker reads each of its YAML rule files with
   PyYAML's pure-Python ``BaseLoader`` on every log it checks (some fifteen files a log: about a
   second of CPU a seed). ``CBaseLoader``, PyYAML's binding of libyaml, builds the same documents
   (strings, lists and mappings only); where PyYAML was built without libyaml, nothing changes.

`tests/mlperf/test_tool_speed.py` holds both equal to the package's own: the strip on many lines,
the loader on every rule file the package ships.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable, Iterable, Iterator
from types import ModuleType, SimpleNamespace
from typing import Any

import yaml


def linear_prefix_strip(line: str, token: str) -> str:
    """``re.sub(".*" + token, token, line)`` for a token free of regex metacharacters, in linear time."""
    return "\n".join(piece[piece.rfind(token):] if token in piece else piece for piece in line.split("\n"))


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


def libyaml_base_load(stream: Any, Loader: Any = None) -> Any:  # noqa: N803  (yaml.load's own keyword)
    """``yaml.load(stream, Loader=BaseLoader)`` by libyaml where PyYAML has it; other loaders as asked."""
    if Loader is yaml.BaseLoader and getattr(yaml, "CBaseLoader", None) is not None:
        Loader = yaml.CBaseLoader  # noqa: N806
    return yaml.load(stream, Loader=Loader)  # noqa: S506  (BaseLoader or the caller's own choice)


@contextlib.contextmanager
def faster_tools() -> Iterator[None]:
    """Within the block, mlperf_logging's parsers strip line prefixes by `linear_prefix_strip` and
    its compliance checker reads its rule files by `libyaml_base_load`; put back on exit."""
    from mlperf_logging.compliance_checker import mlp_compliance

    saved: list[tuple[ModuleType, str, Any]] = [(mlp_compliance, "yaml", mlp_compliance.yaml)]
    replacements: list[tuple[ModuleType, str, Any]] = [
        (mlp_compliance, "yaml", SimpleNamespace(load=libyaml_base_load, BaseLoader=yaml.BaseLoader))]
    for module in ruleset_parsers():
        if hasattr(module, "strip_and_dedup"):
            saved.append((module, "strip_and_dedup", module.strip_and_dedup))
            replacements.append((module, "strip_and_dedup", _strip_and_dedup_for(module)))
    try:
        for module, name, value in replacements:
            setattr(module, name, value)
        yield
    finally:
        for module, name, value in saved:
            setattr(module, name, value)
