"""Reading a YAML file into a typed model: the one way every configuration file of mltrain
(seeds.yaml, workload.yaml, qualify.yaml, a references file) turns a problem into a one-line
ConfigError naming the file and the field."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from orchestrator.config.reading import UnreadableFile, open_regular
from orchestrator.errors import ConfigError

M = TypeVar("M", bound=BaseModel)


def one_line(text: str) -> str:
    return " ".join(text.split())


def first_problem(exc: ValidationError, *, count_others: bool = False) -> str:
    """``field a.b: what is wrong`` for the first error (and how many more, when asked)."""
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "(top level)"
    more = f" (and {exc.error_count() - 1} more)" if count_others and exc.error_count() > 1 else ""
    return f"field {where}: {one_line(first['msg'])}{more}"


MAX_FILE_BYTES = 16 * 2**20
"""The largest configuration file read (seeds.yaml and its kin are a few kB)."""
MAX_YAML_NODES = 200_000
"""The most nodes a YAML document may hold once its aliases are expanded: anchors and aliases are
allowed (qualify.yaml shares its suites through them), an alias bomb ("billion laughs") is not."""


def read_text(path: Path, *, label: str | None = None, missing: str | None = None,
              max_bytes: int = MAX_FILE_BYTES) -> str:
    """A configuration file's text: UTF-8, at most ``max_bytes``; one-line ConfigError otherwise.
    ``label`` names it in errors (default: its path); ``missing`` is what to say when it does not
    exist (default: the system's own words, like any unreadable file)."""
    label = label or str(path)
    try:
        with open_regular(path) as handle:  # a FIFO given as qualify.yaml or --references blocked for good
            data = handle.read(max_bytes + 1)
    except FileNotFoundError as exc:
        if missing is None:
            raise ConfigError(f"{label}: cannot read: {one_line(str(exc))}") from None
        raise ConfigError(f"{label}: {missing}") from None
    except UnreadableFile as exc:
        raise ConfigError(f"{label}: {exc.strerror}") from None
    except OSError as exc:
        raise ConfigError(f"{label}: cannot read: {one_line(str(exc))}") from None
    if len(data) > max_bytes:
        raise ConfigError(f"{label}: larger than {max_bytes // 2**20} MiB: not a configuration file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise ConfigError(f"{label}: not UTF-8 text (byte 0x{data[exc.start]:02x} on line {line}): save it as"
                          " UTF-8") from None


def read_yaml(path: Path, *, label: str | None = None, missing: str | None = None) -> Any:
    """The parsed file (see `read_text` and `parse_yaml`)."""
    label = label or str(path)
    return parse_yaml(read_text(path, label=label, missing=missing), label=label)


def parse_yaml(text: str, *, label: str) -> Any:
    """YAML text as Python values (safe types only), its alias expansion bounded, a key given twice in
    one mapping refused (PyYAML would keep the last one without a word)."""
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        size = _expanded_size(node, {})
        if size > MAX_YAML_NODES:
            raise ConfigError(f"its aliases expand to {size:,} nodes (at most {MAX_YAML_NODES:,}): write"
                              " the values out, or share fewer of them")
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{label}: cannot read: {one_line(str(exc))}") from None
    except RecursionError:
        raise ConfigError(f"{label}: cannot read: nested too deeply") from None
    except ConfigError as exc:
        raise ConfigError(f"{label}: {exc}") from None
    finally:
        loader.dispose()


_WALKING = -1


def _expanded_size(node: yaml.Node, sizes: dict[int, int]) -> int:
    """Nodes under ``node`` with every alias expanded; an aliased node is counted once per use but
    walked once (``sizes``), so the count itself costs no more than the document's own size."""
    known = sizes.get(id(node))
    if known == _WALKING:
        raise ConfigError(f"an alias refers to its own anchor (line {node.start_mark.line + 1}): not a value")
    if known is not None:
        return known
    sizes[id(node)] = _WALKING
    if isinstance(node, yaml.MappingNode):
        _unique_keys(node)
        size = 1 + sum(_expanded_size(k, sizes) + _expanded_size(v, sizes) for k, v in node.value)
    elif isinstance(node, yaml.SequenceNode):
        size = 1 + sum(_expanded_size(item, sizes) for item in node.value)
    else:
        size = 1
    sizes[id(node)] = min(size, 10 * MAX_YAML_NODES)
    return sizes[id(node)]


def validated(model: type[M], raw: Any, *, label: str, context: dict[str, Any] | None = None) -> M:
    try:
        return model.model_validate(raw, context=context)
    except ValidationError as exc:
        raise ConfigError(f"{label}: invalid {first_problem(exc)}") from None


MERGE_TAG = "tag:yaml.org,2002:merge"


def _unique_keys(node: yaml.MappingNode) -> None:
    """Each key of a mapping once: a repeated key would silently replace the first (a suite, a reference).
    Keys brought in by a merge (``<<: *anchor``) may be overridden: that is what the merge is for."""
    seen: dict[str, int] = {}
    for key, _ in node.value:
        if not isinstance(key, yaml.ScalarNode) or key.tag == MERGE_TAG:
            continue
        line = key.start_mark.line + 1
        if key.value in seen:
            raise ConfigError(f"key {key.value!r} is given twice in one mapping (lines {seen[key.value]} and {line}):"
                              " only one would be kept; remove or rename one")
        seen[key.value] = line
