"""mlperf_logging's parsers strip each line's prefix in quadratic time; mltrain calls them with a
linear strip whose output is the package's own."""

from __future__ import annotations

import random
import re
import time
from pathlib import Path

from orchestrator.mlperf import checkers
from orchestrator.mlperf.line_prefix import linear_prefix_strip, ruleset_parsers, stripped_in_linear_time

TOKEN = ":::MLLOG "
PIECES = [TOKEN, ":::MLL", ":::", "MLLOG ", "\n", "\r", " ", "x", "{", "]", "é", ":", "\t"]


def test_the_linear_strip_is_the_package_s_substitution_on_many_lines():
    draw = random.Random(20261129)
    for _ in range(20_000):
        line = "".join(draw.choice(PIECES) for _ in range(draw.randrange(0, 14)))
        for token in (TOKEN, ":::MLL"):
            assert linear_prefix_strip(line, token) == re.sub(".*" + token, token, line), repr(line)


def test_every_ruleset_parser_is_replaced_within_the_block_and_put_back_after():
    modules = ruleset_parsers()
    assert len(modules) >= 14 and all(hasattr(module, "strip_and_dedup") for module in modules)
    originals = [module.strip_and_dedup for module in modules]
    lines = ["noise :::MLLOG {\"key\": \"a\"}\n", "no token\n", "a :::MLL b\n"]
    expected = [original(lines) for original in originals]
    with stripped_in_linear_time():
        assert all(module.strip_and_dedup is not original for module, original in zip(modules, originals, strict=True))
        assert [module.strip_and_dedup(lines) for module in modules] == expected
    assert [module.strip_and_dedup for module in modules] == originals


def test_the_compliance_checker_reads_a_long_line_in_linear_time(tmp_path: Path):
    """A 4 MB MLLOG line: the package's own strip would take hours; the verdict comes in seconds."""
    log = tmp_path / "result_0.txt"
    log.write_text(':::MLLOG {"namespace": "", "time_ms": 1, "event_type": "POINT_IN_TIME", "key": "note", '
                   '"value": "' + "x" * 4_000_000 + '", "metadata": {}}\n')
    started = time.process_time()
    report = checkers.compliance(log, "5.0.0")
    assert time.process_time() - started < 20
    assert not report.valid
