"""The probe's output: one JSON object per line, after ``:::PROBE ``, on stdout (protocol 2).

The orchestrator reads nothing else of the probe (`orchestrator/qualify/probe_lines.py` is the
reader). In the order printed:

``{"kind": "device", "protocol": 2, "device": "cuda"|"cpu", ...}``
    What the probe runs on (`device.facts`): every CUDA device with its UUID and PCI bus id, or why
    CUDA is unavailable; the torch, CUDA and cuDNN versions; the seed.
``{"kind": "result", "check", "metric", "sanity": {"passed", "detail"}, "performance": {"value",
"unit", "better", "detail"}, "gpu"?}``
    One case: did it compute the right thing (``sanity``: the product checked, the copy verified, the
    all-reduce summed right), apart from how fast (``performance``). ``gpu``: CUDA's index, on a
    case that runs on every GPU of two or more (its metric then ends in ``_gpu<i>``).
``{"kind": "skip", "check", "metric", "reason"}``
    A case this device cannot run (tf32 on a CPU, all-reduce on one GPU).
``{"kind": "error", "check", "metric", "error"}``
    A case that raised (an out-of-memory error is also written to stderr as PyTorch words it).
``{"kind": "timing", "check", "seconds"}``
    A check is done (one per check of the configured order, run or not).

Protocol 1 (before the probe became a package) had ``"sane"`` and a ``"detail"`` mixing the
sanity's words with the timing's on a result line, and no ``protocol`` on the device line.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass
from typing import Literal

PREFIX = ":::PROBE "
PROTOCOL = 2


@dataclass(frozen=True, kw_only=True)
class Sanity:
    """Whether a case computed the right thing, and how that was checked."""

    passed: bool
    detail: str


@dataclass(frozen=True, kw_only=True)
class Performance:
    """How fast a case ran: one number with its unit."""

    value: float
    unit: str
    detail: str
    better: Literal["higher", "lower"] = "higher"


@dataclass(frozen=True, kw_only=True)
class Outcome:
    """What measuring one case gives: its sanity and its performance, reported side by side."""

    sanity: Sanity
    performance: Performance


def line(kind: str, **fields: object) -> str:
    """One protocol line (without its newline)."""
    return PREFIX + json.dumps({"kind": kind, **fields}, sort_keys=True)


def emit(kind: str, **fields: object) -> None:
    """Write one line to stdout at once: the orchestrator follows it live."""
    sys.stdout.write(line(kind, **fields) + "\n")
    sys.stdout.flush()


def device(facts: dict[str, object]) -> None:
    emit("device", protocol=PROTOCOL, **facts)


def result(check: str, metric: str, outcome: Outcome, gpu: int | None = None) -> None:
    emit("result", check=check, metric=metric, sanity=asdict(outcome.sanity),
         performance=asdict(outcome.performance), **({"gpu": gpu} if gpu is not None else {}))


def skip(check: str, metric: str, reason: str) -> None:
    emit("skip", check=check, metric=metric, reason=reason)


def error(check: str, metric: str, text: str, gpu: int | None = None) -> None:
    emit("error", check=check, metric=metric, error=text, **({"gpu": gpu} if gpu is not None else {}))


def timing(check: str, seconds: float) -> None:
    emit("timing", check=check, seconds=seconds)


def one_line(exc: BaseException) -> str:
    """An exception's words as one line of at most 400 characters, for an error line."""
    return " ".join(str(exc).split())[:400]
