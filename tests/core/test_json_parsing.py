"""`parse_json` parses with pydantic's parser and, where that refuses a text, with the standard
library's, whose verdict stands: whatever the path, the value is the one `json.loads` gives, and a
text that is not JSON is refused in the standard library's words."""

from __future__ import annotations

import json
import math
import random
import struct

import pytest

from orchestrator.config import reading
from orchestrator.config.reading import JsonProblem, parse_json

BOTH_READ = [
    b'{"a": 1, "a": 2}', b"123456789012345678901234567890", b"-0", b"1e400", b"[Infinity, -Infinity]", b"1E2",
    b'"\\u0000 \\u00e9 \\ud83d\\ude00"', b'  {"run": ["x", 1, 2.5, null, true]}  ', '"é"'.encode(),
    b'{"nested": {"deeper": [[[{"k": "v"}]]]}}', b"1795999845.6669693",
]
STANDARD_LIBRARY_ONLY = [b'"\\ud800"', b"\xef\xbb\xbf{}", "{}".encode("utf-16"), "[1]".encode("utf-32")]


def same(a: object, b: object) -> bool:
    """Equal as JSON values are, NaN equal to NaN, and of the same types all the way down."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)  # type: ignore[index]
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))  # type: ignore[arg-type]
    return a == b


@pytest.mark.parametrize("text", BOTH_READ + STANDARD_LIBRARY_ONLY + [b"NaN"])
def test_a_text_is_the_value_the_standard_library_reads(text: bytes):
    assert same(parse_json(text), json.loads(text))
    assert same(parse_json(text.decode(json.detect_encoding(text))), json.loads(text))


def test_a_float_is_the_double_the_standard_library_reads():
    draw = random.Random(36)
    texts = []
    for _ in range(20_000):
        value = struct.unpack("d", struct.pack("Q", draw.getrandbits(64)))[0]
        if math.isfinite(value):
            texts += [repr(value), f"{value:.25g}", f"{draw.uniform(-1e6, 1e6):.3f}"]
    document = "[" + ",".join(texts) + "]"
    assert parse_json(document) == json.loads(document)


@pytest.mark.parametrize("text", [b'{"a": 1} x', b"[1,]", b'"a\tb"', b'"\xff"', b"", b"{'a': 1}"])
def test_a_text_that_is_not_json_is_refused_in_the_standard_library_s_words(text: bytes):
    with pytest.raises(ValueError) as standard:
        json.loads(text)
    with pytest.raises(JsonProblem) as ours:
        parse_json(text)
    assert str(ours.value).startswith("not JSON (")
    if isinstance(standard.value, json.JSONDecodeError):
        assert standard.value.msg in str(ours.value)


def test_the_faster_parser_reads_what_it_can(monkeypatch: pytest.MonkeyPatch):
    """Where pydantic's parser reads a text, the standard library's is not asked."""
    monkeypatch.setattr(reading.json, "loads", lambda *_: pytest.fail("json.loads was asked"))
    assert parse_json(BOTH_READ[-2]) == {"nested": {"deeper": [[[{"k": "v"}]]]}}
