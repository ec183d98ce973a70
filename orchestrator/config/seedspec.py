"""Seed specs as users type them: ``1-9``, ``1,3,5-7``, ``random:40``."""

from __future__ import annotations

import re
import secrets

from orchestrator.errors import UsageError

MAX_SEED = 2**31 - 1
_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")
_RANDOM = re.compile(r"^random:(\d+)$")


def parse_seeds(spec: str) -> tuple[list[int], bool]:
    """Return (seeds, drawn_at_random). Random seeds come from the OS and never repeat."""
    text = spec.strip()
    if not text:
        raise UsageError("empty seed spec: give seeds like 1-9, 1,3,5-7 or random:40")
    match = _RANDOM.match(text)
    if match:
        count = int(match.group(1))
        if not 1 <= count <= 1000:
            raise UsageError(f"seed spec {spec!r}: random:N needs 1 <= N <= 1000")
        return _draw_distinct(count), True
    seeds: list[int] = []
    for part in text.split(","):
        part = part.strip()
        found = _RANGE.match(part)
        if not found:
            raise UsageError(
                f"seed spec {spec!r}: {part!r} is not a seed or range (use 1-9, 1,3,5-7 or random:40)"
            )
        low = int(found.group(1))
        high = int(found.group(2)) if found.group(2) is not None else low
        if high < low:
            raise UsageError(f"seed spec {spec!r}: range {part!r} runs backwards (write {high}-{low})")
        if high > MAX_SEED:
            raise UsageError(f"seed spec {spec!r}: seeds must be at most {MAX_SEED}")
        if high - low >= 10000:
            raise UsageError(f"seed spec {spec!r}: range {part!r} has more than 10000 seeds")
        seeds.extend(range(low, high + 1))
    duplicates = sorted({s for s in seeds if seeds.count(s) > 1})
    if duplicates:
        raise UsageError(f"seed spec {spec!r}: seed(s) {', '.join(map(str, duplicates))} given twice")
    return seeds, False


def _draw_distinct(count: int) -> list[int]:
    drawn: list[int] = []
    while len(drawn) < count:
        seed = secrets.randbelow(MAX_SEED) + 1
        if seed not in drawn:
            drawn.append(seed)
    return drawn
