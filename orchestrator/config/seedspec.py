"""Seed specs as users type them: ``1-9``, ``1,3,5-7``, ``random:40``."""

from __future__ import annotations

import re
import secrets

from orchestrator.errors import UsageError

MAX_SEED = 2**31 - 1
MAX_SEEDS = 10000
"""Most seeds one spec may name, in one range or in all (a run of more is a typo, not a plan)."""
_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")
_RANDOM = re.compile(r"^random:(\d+)$")
_EXAMPLES = "use 1-9, 1,3,5-7 or random:40"


def parse_seeds(spec: str) -> tuple[list[int], bool]:
    """Return (seeds, drawn_at_random). Random seeds come from the OS and never repeat."""
    text = spec.strip()
    if not text:
        raise UsageError(f"empty seed spec: {_EXAMPLES}")
    match = _RANDOM.match(text)
    if match:
        count = int(match.group(1))
        if not 1 <= count <= 1000:
            raise UsageError(f"seed spec {spec!r}: random:N needs 1 <= N <= 1000")
        return _draw_distinct(count), True
    seeds: list[int] = []
    seen: set[int] = set()
    repeated: list[int] = []
    for part in text.split(","):
        part = part.strip()
        found = _RANGE.match(part)
        if not found:
            raise UsageError(f"seed spec {spec!r}: {part!r} is not a seed or range ({_EXAMPLES})")
        low = int(found.group(1))
        high = int(found.group(2)) if found.group(2) is not None else low
        if high < low:
            raise UsageError(f"seed spec {spec!r}: range {part!r} runs backwards (write {high}-{low})")
        if high > MAX_SEED:
            raise UsageError(f"seed spec {spec!r}: seeds must be at most {MAX_SEED}")
        if high - low >= MAX_SEEDS:
            raise UsageError(f"seed spec {spec!r}: range {part!r} has more than {MAX_SEEDS} seeds")
        if len(seeds) + high - low + 1 > MAX_SEEDS:
            raise UsageError(f"seed spec {spec!r}: more than {MAX_SEEDS} seeds in all")
        for seed in range(low, high + 1):  # one pass with a set: linear however the parts overlap
            if seed in seen:
                repeated.append(seed)
            else:
                seen.add(seed)
                seeds.append(seed)
    if repeated:
        shown = ", ".join(map(str, sorted(set(repeated))[:10])) + (" ..." if len(set(repeated)) > 10 else "")
        raise UsageError(f"seed spec {spec!r}: seed(s) {shown} given twice")
    return seeds, False


def _draw_distinct(count: int) -> list[int]:
    drawn: list[int] = []
    seen: set[int] = set()
    while len(drawn) < count:
        seed = secrets.randbelow(MAX_SEED) + 1
        if seed not in seen:
            seen.add(seed)
            drawn.append(seed)
    return drawn
