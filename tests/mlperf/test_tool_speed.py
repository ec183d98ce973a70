"""mlperf_logging's tools, called with two of their steps done faster (`tool_speed`): a line's
prefix stripped in linear time where the package's regex is quadratic, its rule files read by
libyaml; each step's output the package's own."""

from __future__ import annotations

import random
import re
import time
from pathlib import Path

import yaml

from orchestrator.mlperf import checkers
from orchestrator.mlperf.tool_speed import faster_tools, libyaml_base_load, linear_prefix_strip, ruleset_parsers

TOKEN = ":::MLLOG "
PIECES = [TOKEN, ":::MLL", ":::", "MLLOG ", "\n", "\r", " ", "x", "{", "]", "é", ":", "\t"]


def test_the_linear_strip_is_the_package_s_substitution_on_many_lines():
    draw = random.Random(20261129)
    for _ in range(20_000):
        line = "".join(draw.choice(PIECES) for _ in range(draw.randrange(0, 14)))
        for token in (TOKEN, ":::MLL"):
            assert linear_prefix_strip(line, token) == re.sub(".*" + token, token, line), repr(line)


def test_every_ruleset_parser_and_the_checker_s_loader_are_replaced_within_the_block_and_put_back_after():
    modules = ruleset_parsers()
    assert len(modules) >= 14 and all(hasattr(module, "strip_and_dedup") for module in modules)
    originals = [module.strip_and_dedup for module in modules]
    lines = ["noise :::MLLOG {\"key\": \"a\"}\n", "no token\n", "a :::MLL b\n"]
    expected = [original(lines) for original in originals]
    with faster_tools():
        assert all(module.strip_and_dedup is not original for module, original in zip(modules, originals, strict=True))
        assert [module.strip_and_dedup(lines) for module in modules] == expected
    assert [module.strip_and_dedup for module in modules] == originals
    from mlperf_logging.compliance_checker import mlp_compliance

    with faster_tools():
        assert mlp_compliance.yaml.load is libyaml_base_load
    assert mlp_compliance.yaml is yaml


def test_libyaml_reads_every_rule_file_of_the_package_as_its_base_loader_does():
    import mlperf_logging

    files = sorted(Path(mlperf_logging.__file__).parent.joinpath("compliance_checker").rglob("*.yaml"))
    assert len(files) > 200 and getattr(yaml, "CBaseLoader", None) is not None
    for path in files:  # a few are not YAML (training_0.7.0_warn/bert.yaml): both refuse them alike
        with path.open() as fast, path.open() as reference:
            assert outcome(libyaml_base_load, fast) == outcome(yaml.load, reference), path


def outcome(load, stream) -> object:
    try:
        return load(stream, Loader=yaml.BaseLoader)
    except yaml.YAMLError as exc:
        return type(exc).__name__  # the same class of error; libyaml words it its own way


def test_the_compliance_checker_reads_a_long_line_in_linear_time(tmp_path: Path):
    """A 4 MB MLLOG line: the package's own strip would take hours; the verdict comes in seconds."""
    log = tmp_path / "result_0.txt"
    log.write_text(':::MLLOG {"namespace": "", "time_ms": 1, "event_type": "POINT_IN_TIME", "key": "note", '
                   '"value": "' + "x" * 4_000_000 + '", "metadata": {}}\n')
    started = time.process_time()
    report = checkers.compliance(log, "5.0.0")
    assert time.process_time() - started < 20
    assert not report.valid
