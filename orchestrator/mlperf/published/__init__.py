"""Published MLPerf Training results of the benchmarks mltrain runs (unet3d and resnet, rounds
v0.5 to v4.0, both retired after v4.0; llama31_8b, round v5.1), shipped as package data (``systems.csv``, see the
README beside it): one row per published system and benchmark, with its per-run times, so that
`mltrain compare --published` and the report can place a user's setups beside them.

Scores are MLCommons' (olympic mean of the converged runs' minutes, times the RCP scaling factor
where review set one); `PublishedSystem.recomputed_minutes` recomputes one from the per-run
times with mltrain's own olympic rule.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from orchestrator.errors import UsageError
from orchestrator.mlperf import benchmarks

TABLE = "systems.csv"
COLUMNS = ("round", "submitter", "system", "benchmark", "division", "accelerator", "accelerator_class",
           "accelerators", "nodes", "global_batch_size", "runs", "nonconverged", "scaling_factor", "olympic_minutes",
           "olympic_unscaled", "run_minutes", "run_epochs", "note")
_CLASS = re.compile(r"(?<![A-Za-z0-9])([A-Z]{1,2}\d{1,4}[A-Z]?)(?![A-Za-z0-9])")


@dataclass(frozen=True, kw_only=True)
class PublishedSystem:
    """One published result: a system's runs of one benchmark in one round."""

    round: str
    submitter: str
    system: str
    benchmark: str
    division: str
    accelerator: str
    """As the system description names it ('NVIDIA H100-SXM5-80GB')."""
    accelerator_class: str
    """The model family ('H100', 'A100', 'TPU v4')."""
    accelerators: int | None
    nodes: int | None
    global_batch_size: int | None
    runs: int
    nonconverged: int
    scaling_factor: float
    olympic_minutes: float | None
    """The score as published (scaling factor applied), 3 decimals; None where the logs were absent."""
    olympic_unscaled: float | None
    run_minutes: tuple[float, ...]
    """Minutes of each converged run (4 decimals)."""
    run_epochs: tuple[float | None, ...]
    """Epochs-to-target of each converged run (logs counting samples divided by 168; llama31_8b:
    sequences to target)."""
    note: str = ""

    @property
    def name(self) -> str:
        return f"{self.round} {self.submitter} {self.system}"

    @property
    def hardware(self) -> str:
        return f"{self.accelerators}x {self.accelerator}" if self.accelerators else self.accelerator

    @property
    def drop_per_end(self) -> int:
        """What MLCommons' summarizer drops at each end for the benchmark."""
        return benchmarks.get(self.benchmark).drop_per_end

    def recomputed_minutes(self, *, scaled: bool = True) -> float | None:
        """The olympic mean of the per-run minutes (x the scaling factor), by mltrain's olympic rule."""
        from orchestrator.mlperf.scoring import olympic_mean

        mean = olympic_mean(self.run_minutes, self.nonconverged, self.drop_per_end)
        return None if mean is None else mean * (self.scaling_factor if scaled else 1.0)


def load(path: Path | None = None) -> list[PublishedSystem]:
    """The shipped table (or the one at ``path``)."""
    text = path.read_text() if path is not None else resources.files(__package__).joinpath(TABLE).read_text()
    return [_row(row) for row in csv.DictReader(io.StringIO(text))]


def _row(row: dict[str, str]) -> PublishedSystem:
    return PublishedSystem(
        round=row["round"], submitter=row["submitter"], system=row["system"], benchmark=row["benchmark"],
        division=row["division"], accelerator=row["accelerator"], accelerator_class=row["accelerator_class"],
        accelerators=_int(row["accelerators"]), nodes=_int(row["nodes"]),
        global_batch_size=_int(row["global_batch_size"]),
        runs=int(row["runs"]), nonconverged=int(row["nonconverged"]), scaling_factor=float(row["scaling_factor"] or 1),
        olympic_minutes=_float(row["olympic_minutes"]), olympic_unscaled=_float(row["olympic_unscaled"]),
        run_minutes=tuple(float(v) for v in row["run_minutes"].split()),
        run_epochs=tuple(None if v == "-" else float(v) for v in row["run_epochs"].split()),
        note=row.get("note", ""),
    )


def write(path: Path, systems: Iterable[PublishedSystem]) -> None:
    """The table as CSV (columns COLUMNS), through an atomic write."""
    from orchestrator.results import atomic

    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(COLUMNS), lineterminator="\n")
    writer.writeheader()
    for s in systems:
        writer.writerow({
            "round": s.round, "submitter": s.submitter, "system": s.system, "benchmark": s.benchmark,
            "division": s.division, "accelerator": s.accelerator, "accelerator_class": s.accelerator_class,
            "accelerators": _cell(s.accelerators), "nodes": _cell(s.nodes),
            "global_batch_size": _cell(s.global_batch_size), "runs": s.runs, "nonconverged": s.nonconverged,
            "scaling_factor": repr(float(s.scaling_factor)), "olympic_minutes": _cell(s.olympic_minutes),
            "olympic_unscaled": _cell(s.olympic_unscaled), "run_minutes": " ".join(_num(m) for m in s.run_minutes),
            "run_epochs": " ".join("-" if e is None else _num(e) for e in s.run_epochs), "note": s.note,
        })
    atomic.write_text(path, buffer.getvalue())


def _int(text: str) -> int | None:
    return int(float(text)) if text else None


def _float(text: str) -> float | None:
    return float(text) if text else None


def _cell(value: object) -> str:
    return "" if value is None else _num(value) if isinstance(value, float) else str(value)


def _num(value: float) -> str:
    """Shortest text that reads back as the same number ('2100', '137.9848')."""
    return str(int(value)) if float(value).is_integer() and abs(value) < 1e15 else repr(float(value))


# ---------------------------------------------------------------- finding systems like yours


def accelerator_class(name: str | None) -> str | None:
    """The model family in an accelerator's name: 'NVIDIA H100 80GB HBM3' -> 'H100', 'Tesla T4' -> 'T4'."""
    if not name:
        return None
    found = _CLASS.search(name)
    return found.group(1) if found else None


def _words(text: str) -> str:
    """Lower case, punctuation as single spaces: 'NVIDIA A100-SXM4-80GB (400W)' -> 'nvidia a100 sxm4 80gb 400w'."""
    return " ".join(re.sub(r"[^a-z0-9]+", " ", text.lower()).split())


def accelerator_matches(wanted: str, system: PublishedSystem) -> bool:
    """The wanted words appear whole in the model name ('A10' is not 'A100'), or name its family."""
    words = _words(wanted)
    if not words:
        return True
    if words == _words(system.accelerator_class):
        return True
    return re.search(rf"(?<![a-z0-9]){re.escape(words)}(?![a-z0-9])", _words(system.accelerator)) is not None


@dataclass(frozen=True)
class Query:
    """Which published systems to show: a benchmark, optionally an accelerator (or a submitter's
    system name), a count and a round."""

    benchmark: str
    accelerator: str | None = None
    """Whole words of the model name, or its family, ignoring case and punctuation ('h100', 'A100-SXM4-80GB');
    or a system's name as its submitter published it ('eos_ngc24.04_mxnet', 'NVIDIA/eos_ngc24.04_mxnet')."""
    count: int | None = None
    round: str | None = None
    """'v4.0'; None: the latest round with a match."""

    def __str__(self) -> str:
        if self.accelerator:
            said = f"{self.benchmark} on {f'{self.count}x ' if self.count else ''}{self.accelerator}"
        else:
            said = f"{self.benchmark} on {self.count} accelerators" if self.count else self.benchmark
        return said + (f" in {self.round}" if self.round else "")


ROUND = re.compile(r"^v?(\d+)\.(\d+)$")


def round_key(name: str) -> tuple[int, ...]:
    """'v4.0' -> (4, 0), for ordering rounds."""
    return tuple(int(part) for part in name.lstrip("v").split("."))


def parse_query(text: str) -> Query:
    """``BENCHMARK[:ACCELERATOR-OR-SYSTEM[:COUNT]][@ROUND]`` ('unet3d:H100:8@4.0', 'resnet:A100',
    'unet3d::8', 'unet3d:eos_ngc24.04_mxnet')."""
    body, at, round_text = text.partition("@")
    chosen_round = None
    if at:
        found = ROUND.match(round_text.strip())
        if not found:
            raise UsageError(f"--published {text!r}: ROUND is a training round, e.g. @4.0 or @v3.1")
        chosen_round = f"v{found.group(1)}.{found.group(2)}"
    parts = [p.strip() for p in body.split(":")]
    if not parts[0] or len(parts) > 3:
        raise UsageError(f"--published {text!r}: give BENCHMARK[:ACCELERATOR[:COUNT]][@ROUND], e.g."
                         " unet3d:H100:8@4.0, a system (unet3d:eos_ngc24.04_mxnet), or auto")
    shipped = benchmarks.with_published_results()
    if parts[0] not in shipped:
        raise UsageError(f"--published {text!r}: the table holds {', '.join(shipped)}, not {parts[0]!r}")
    count = None
    if len(parts) == 3 and parts[2]:
        if not parts[2].isdigit() or not 0 < int(parts[2]) < 1_000_000:
            raise UsageError(f"--published {text!r}: COUNT must be a positive whole number")
        count = int(parts[2])
    return Query(parts[0], parts[1] if len(parts) > 1 and parts[1] else None, count, chosen_round)


def system_matches(wanted: str, system: PublishedSystem) -> bool:
    """``wanted`` is the system's name, or SUBMITTER/SYSTEM (ignoring case)."""
    name = wanted.lower()
    return name in (system.system.lower(), f"{system.submitter}/{system.system}".lower())


def matching(systems: Sequence[PublishedSystem], query: Query) -> list[PublishedSystem]:
    """Published systems of the query's benchmark, in its round when it names one, with a score,
    fastest first: those of the system it names, else those whose accelerator matches (and count)."""
    scored = [s for s in systems if s.benchmark == query.benchmark and s.olympic_minutes is not None
              and (query.round is None or s.round == query.round)]
    named = [s for s in scored if query.accelerator and system_matches(query.accelerator, s)]
    found = named or [s for s in scored if accelerator_matches(query.accelerator or "", s)
                      and (query.count is None or s.accelerators == query.count)]
    return sorted(found, key=lambda s: (s.olympic_minutes or 0.0, s.round, s.system))


def representative(systems: Sequence[PublishedSystem], query: Query) -> tuple[PublishedSystem | None, str]:
    """The one published result a query stands for, and a sentence saying which and why: of the
    matches, those of the round it names, else of the latest round with a match (systems of one
    round share a ruleset and the software of their time); of several, the median score (neither
    the fastest nor the slowest submission: picking the fastest flatters a family with many
    submitters). None and why, where nothing matches."""
    found = matching(systems, query)
    if not found:
        if query.round is not None and matching(systems, Query(query.benchmark, query.accelerator, query.count)):
            rounds = sorted({s.round for s in matching(systems, Query(query.benchmark, query.accelerator,
                                                                       query.count))}, key=round_key)
            return None, f"no published result of {query}; it was published in {', '.join(rounds)}"
        return None, no_match_sentence(systems, query)
    rounds = sorted({s.round for s in found}, key=round_key)
    latest = [s for s in found if s.round == rounds[-1]]
    chosen = latest[(len(latest) - 1) // 2]
    scores = f"{latest[0].olympic_minutes:g}-{latest[-1].olympic_minutes:g} min"
    if len(found) == 1:
        why = "the one match"
    elif len(latest) == 1:
        why = f"the one of {rounds[-1]}, the latest of the {len(found)} matches' rounds ({', '.join(rounds)})"
    else:
        why = (f"the median of {rounds[-1]}'s {len(latest)} ({scores})"
               + (f", the latest round of {len(found)} matches" if len(rounds) > 1 else ""))
    hint = "" if len(found) == 1 else f"; name another as {query.benchmark}:[SUBMITTER/]SYSTEM@ROUND"
    return chosen, f"{query}: used {chosen.name}, {why}{hint}"


def no_match_sentence(systems: Sequence[PublishedSystem], query: Query) -> str:
    """Why nothing matched: what the table does hold for the benchmark."""
    same_class = matching(systems, Query(query.benchmark, query.accelerator)) if query.accelerator else []
    if same_class:
        counts = sorted({s.accelerators for s in same_class if s.accelerators})
        return (f"no published result of {query}; {query.benchmark} was published on {query.accelerator} with"
                f" {', '.join(map(str, counts))} accelerators")
    classes = sorted({s.accelerator_class for s in systems if s.benchmark == query.benchmark and s.olympic_minutes})
    return (f"no {query.benchmark} result on {query.accelerator or 'that count'} was ever published"
            f" (published {query.benchmark} accelerators: {', '.join(classes)})")
