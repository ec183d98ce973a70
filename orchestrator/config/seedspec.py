"""Seed specs as users type them: ``1-9``, ``1,3,5-7``, ``random:40``, parsed once (on the command
line, or in seeds.yaml) into a `SeedSpec` that is passed from there on."""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass, field
from typing import Literal

from orchestrator.errors import UsageError

MAX_SEED = 2**31 - 1
MAX_SEEDS = 10000
"""Most seeds one spec may name, in one range or in all (a run of more is a typo, not a plan)."""
MAX_RANDOM = 1000
_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")
_RANDOM = re.compile(r"^random:(\d+)$")
_EXAMPLES = "use 1-9, 1,3,5-7 or random:40"
AUTO: Literal["auto"] = "auto"
"""`--seeds auto`: as many seeds as the run's own rule asks for (`orchestrator.session.deciding`)."""


@dataclass(frozen=True)
class SeedSpec:
    """A seed spec, checked: the seeds it lists, or how many it draws from the OS (``random:N``)."""

    listed: tuple[int, ...] = ()
    random: int = 0
    """random:N: N seeds drawn from the OS each time the seeds are taken (0: ``listed``)."""
    text: str = field(default="", compare=False)
    """The spec as it was written (`str` of it)."""

    @classmethod
    def parse(cls, spec: str) -> SeedSpec:
        """The spec a user typed; UsageError saying what is wrong with it."""
        text = spec.strip()
        if not text:
            raise UsageError(f"empty seed spec: {_EXAMPLES}")
        match = _RANDOM.match(text)
        if match:
            count = int(match.group(1))
            if not 1 <= count <= MAX_RANDOM:
                raise UsageError(f"seed spec {spec!r}: random:N needs 1 <= N <= {MAX_RANDOM}")
            return cls(random=count, text=text)
        return cls(listed=_listed(spec, text), text=text)

    def seeds(self) -> tuple[int, ...]:
        """The seeds a run takes: the listed ones, or ``random`` distinct ones drawn now (never repeating)."""
        return _draw_distinct(self.random) if self.random else self.listed

    def order(self, count: int) -> tuple[int, ...]:
        """The ``count`` seeds a run that decides its own seed count may take, in order: the listed
        ones, then the next integers (or ``count`` seeds drawn from the OS, for a random spec)."""
        if self.random:
            return _draw_distinct(count)
        order = list(self.listed[:count])
        order += range(max(self.listed) + 1, max(self.listed) + 1 + count - len(order))
        return tuple(order)

    def __str__(self) -> str:
        return self.text or (f"random:{self.random}" if self.random else ",".join(map(str, self.listed)))


def parse_option(text: str | None) -> SeedSpec | Literal["auto"] | None:
    """``--seeds`` as given: a spec, `AUTO`, or None (not given: the profile's)."""
    if text is None:
        return None
    return AUTO if text.strip() == AUTO else SeedSpec.parse(text)


def _listed(spec: str, text: str) -> tuple[int, ...]:
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
    return tuple(seeds)


def _draw_distinct(count: int) -> tuple[int, ...]:
    drawn: list[int] = []
    seen: set[int] = set()
    while len(drawn) < count:
        seed = secrets.randbelow(MAX_SEED) + 1
        if seed not in seen:
            seen.add(seed)
            drawn.append(seed)
    return tuple(drawn)
