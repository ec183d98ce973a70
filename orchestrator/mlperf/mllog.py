"""Read ``:::MLLOG`` lines into a `RunRecord`.

The one module that reads ``:::MLLOG`` text: whole logs (`parse_lines`, `parse_file`), single
lines as they stream in (`parse_line`), and the bare MLLOG lines of an output for MLCommons'
tools (`mllog_lines`). Lines are split out as `mlperf_logging`'s own parser does (it strips
prefixes such as ``0: `` and skips non-MLLOG output); a line that does not parse (a truncated last
line, say) is collected as an error with its line number, not fatal. Numbers the score rests on
are checked as they are read: a ``time_ms`` that is not a finite number of milliseconds, an epoch
or sample count that is not a number, a seed that is not an integer, an eval_accuracy that is not
a number (NaN, which a diverged run may log, is one) make that line a *bad value*, which
`require_scorable` turns into one line naming the file, the line and the field.

Epoch numbers may be logged as epochs or as samples (NVIDIA's v4.0 logs and mltrain's unet3d count
``epoch_num``, ``first_epoch_num`` and ``epoch_count`` in samples, epoch x ``samples_per_epoch``, as
the v4.0 unet3d RCPs do): both become epochs here (`epochs_counted_in_samples`), divided by
``samples_per_epoch`` (else ``train_samples``). Keys are `mlperf_logging.mllog.constants`.
"""

from __future__ import annotations

import io
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from mlperf_logging.compliance_checker.mlp_parser.ruleset_400 import TOKEN
from mlperf_logging.mllog import constants as C

from orchestrator import text
from orchestrator.config.reading import open_regular, parse_json
from orchestrator.errors import LogError
from orchestrator.mlperf.quality import Goal
from orchestrator.mlperf.tool_speed import linear_prefix_strip
from orchestrator.results.records import MAX_RUN_MS, EvalPoint, Exit, RunRecord, RunStatus

MLLOG_PREFIX = ":::MLLOG"
SAMPLES_PER_EPOCH = "samples_per_epoch"
"""Not an mllog constant: some implementations log it when an epoch differs from train_samples."""
RESOLVED_SETTINGS = "resolved_settings"
"""Not an mllog constant: the workloads' precision/threads/device choice (workload conventions)."""
CUTS = "cuts"
"""Not an mllog constant: what a run left out of the benchmark's data; its value's ``text`` says it."""
REASON = "reason"
"""Metadata of submission_division: why the workload chose that division."""
EpochUnit = Literal["auto", "epochs", "samples"]
MAX_TIME_MS = 2.0**53
"""Larger times are not exact in a double (and are 285,000 years of milliseconds)."""
MAX_SEED = 2**63 - 1
MAX_LINE_CHARS = 64 * 1024
"""The longest MLLOG line taken (events are a few hundred characters; resolved_settings a few kB).
Longer ones are refused (one is a bad value), before anything parses them."""
EPOCH_FIELDS = (C.EPOCH_NUM, C.FIRST_EPOCH_NUM, C.EPOCH_COUNT, C.SAMPLES_COUNT)
"""Metadata that count epochs or samples: numbers, or the line is a bad value."""
_METADATA_KEYS = ("submission_", "opt_", "lars_", "sgd_", "model_", "oversampling", "training_input_shape",
                  "validation_input_shape", "validation_overlap", "gradient_accumulation_steps",
                  C.TRAIN_SAMPLES, C.EVAL_SAMPLES, "number_of_nodes", "accelerators_per_node")


class BadValue(ValueError):
    """A line that parses but carries a value the score cannot rest on (NaN time_ms, ...)."""


@dataclass(frozen=True)
class Event:
    key: str
    value: Any
    metadata: dict[str, Any]
    time_ms: float
    line: int = 0
    """Line number in the file (1-based; 0 when unknown)."""


@dataclass(frozen=True)
class LineError:
    """A line that looked like MLLOG but was not taken."""

    line: int
    text: str
    problem: str
    bad_value: bool
    """The line parsed but a value is unusable (see `BadValue`); False for broken syntax."""

    def __str__(self) -> str:
        return f"line {self.line}: {self.problem}"


@dataclass(frozen=True)
class ParsedLog:
    events: tuple[Event, ...]
    errors: tuple[LineError, ...]
    """Lines that looked like MLLOG but did not parse, with the reason."""

    def first(self, key: str) -> Event | None:
        return next((e for e in self.events if e.key == key), None)

    def all(self, key: str) -> list[Event]:
        return [e for e in self.events if e.key == key]

    @property
    def bad_values(self) -> list[LineError]:
        return [e for e in self.errors if e.bad_value]


def is_number(value: object) -> bool:
    """A finite JSON number (booleans are not numbers here)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def parse_line(line: str, number: int = 0) -> Event:
    """One ``:::MLLOG {json}`` line (anything before the prefix is ignored) as an event; `BadValue`
    for a usable line with an unusable value, ValueError, KeyError or TypeError when it is not one."""
    at = line.find(MLLOG_PREFIX)
    if at < 0:
        raise ValueError("not an MLLOG line")
    raw = parse_json(line[at + len(MLLOG_PREFIX):])
    key = str(raw["key"])
    time_ms = raw["time_ms"]
    if not is_number(time_ms) or abs(time_ms) > MAX_TIME_MS:
        raise BadValue(f"{key}: time_ms {_show(time_ms)} is not a finite number of milliseconds")
    metadata = raw.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise TypeError("metadata is not an object")
    for field in EPOCH_FIELDS:
        if field in metadata and not is_number(metadata[field]):
            raise BadValue(f"{key}: {field} {_show(metadata[field])} is not a number")
    value = raw.get("value")
    if key == C.SEED and not (is_number(value) and float(value).is_integer() and abs(value) <= MAX_SEED):
        raise BadValue(f"seed {_show(value)} is not an integer")
    if key == C.EVAL_ACCURACY and not (is_number(value) or _is_nan(value)):
        raise BadValue(f"eval_accuracy {_show(value)} is not a number")
    return Event(key=key, value=value, metadata=dict(metadata), time_ms=float(time_ms), line=number)


def _show(value: object) -> str:
    text = json.dumps(value) if not isinstance(value, float) else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def try_parse_line(line: str) -> Event | None:
    """`parse_line`, or None for anything that is not a whole MLLOG event (progress display)."""
    try:
        return parse_line(line)
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def mllog_lines(text: str) -> list[str]:
    """The ``:::MLLOG`` lines of a run's output, from the prefix on (rank or time prefixes dropped)."""
    lines = []
    for line in text.splitlines():
        at = line.find(MLLOG_PREFIX)
        if at >= 0:
            lines.append(line[at:].rstrip())
    return lines


def parse_lines(lines: Iterable[str]) -> ParsedLog:
    events: list[Event] = []
    errors: list[LineError] = []
    for number, raw in enumerate(lines, start=1):
        if len(raw) > MAX_LINE_CHARS:
            if MLLOG_PREFIX in raw:  # other long output (a progress bar redrawn with \r) is not ours to judge
                errors.append(LineError(number, raw[:80], f"an MLLOG line of {len(raw):,} characters (at most"
                                        f" {MAX_LINE_CHARS:,})", bad_value=True))
            continue
        if TOKEN in raw:  # mlperf_logging's own rule (`strip_and_dedup`: its token), in linear time
            text = linear_prefix_strip(raw, TOKEN).strip()
            try:
                events.append(parse_line(text, number))
            except BadValue as exc:
                errors.append(LineError(number, text[:80], str(exc), bad_value=True))
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                errors.append(LineError(number, text[:80], f"not an MLLOG event ({type(exc).__name__})", False))
    return ParsedLog(tuple(events), tuple(errors))


def parse_file(path: Path) -> ParsedLog:
    """A log file's events: a regular file only (a FIFO among the logs of an import hung it for good)."""
    try:
        with open_regular(path) as handle, io.TextIOWrapper(handle, encoding="utf-8", errors="replace") as text:
            return parse_lines(text)
    except OSError as exc:
        raise LogError(f"{path}: cannot read log: {exc.strerror}") from None


# ---------------------------------------------------------------- units


def _positive_int(event: Event | None) -> int | None:
    if event is not None and is_number(event.value) and event.value > 0:
        return int(event.value)
    return None


def epochs_counted_in_samples(log: ParsedLog, samples_per_epoch: int | None) -> bool:
    """Whether the log counts epochs in samples: every epoch number it logs (``epoch_num`` of
    epochs and evals, ``first_epoch_num`` of blocks) is a whole multiple of ``samples_per_epoch``
    and at least one reaches it. Logs that count epochs log 1, 2, 3 ... or 1000, 1020 ... and fail
    this at their first epoch; NVIDIA's log 168, 3360, ... and 168000, 171360 ...; mltrain's unet3d
    at batch 32 logs 160, 320, ... (160 samples per epoch: the last batch of 168 is dropped)."""
    return counts_samples([float(e.metadata[field]) for e in log.events for field in (C.EPOCH_NUM, C.FIRST_EPOCH_NUM)
                           if field in e.metadata], samples_per_epoch)


def counts_samples(numbers: Sequence[float], samples_per_epoch: int | None) -> bool:
    """The rule of `epochs_counted_in_samples` on the epoch numbers seen so far (a live view
    decides on the first one)."""
    if not samples_per_epoch or samples_per_epoch == 1 or not numbers or max(numbers) < samples_per_epoch:
        return False
    return all(n % samples_per_epoch == 0 for n in numbers)


def _eval_epoch(event: Event, divisor: int | None, in_samples: bool) -> float | None:
    meta = event.metadata
    if C.EPOCH_NUM in meta:
        value = float(meta[C.EPOCH_NUM])
        return value / divisor if in_samples and divisor else value
    if C.SAMPLES_COUNT in meta and divisor:
        return float(meta[C.SAMPLES_COUNT]) / divisor
    return None


# ---------------------------------------------------------------- one run


def build_record(
    log: ParsedLog,
    *,
    goal: Goal,
    exit: Exit | None = None,
    ended: RunStatus | None = None,
    epoch_unit: EpochUnit = "auto",
    samples_per_epoch: int | None = None,
) -> RunRecord:
    """Derive one run's record, judged by ``goal`` (metric, target, direction). ``exit`` is how the
    process ended when we ran it; ``ended`` overrides the status when the orchestrator itself stopped
    the run (timeout, Ctrl-C); ``samples_per_epoch`` is the workload's declaration, used where the
    log states no samples_per_epoch, before its train_samples."""
    metric, target = goal.metric, goal.target
    start = log.first(C.RUN_START)
    stop = log.first(C.RUN_STOP)
    train_samples = _positive_int(log.first(C.TRAIN_SAMPLES))
    # the log's own samples_per_epoch, else the workload's declaration, else train_samples: what
    # train_samples means differs by benchmark (llama31_8b's reference logs the samples it trained)
    samples_per_epoch = _positive_int(log.first(SAMPLES_PER_EPOCH)) or samples_per_epoch or train_samples
    divisor = samples_per_epoch  # what one epoch adds to a samples-counted epoch number
    in_samples = epoch_unit == "samples" or (epoch_unit == "auto" and epochs_counted_in_samples(log, divisor))
    evals: list[EvalPoint] = []
    reached = False
    epochs_to_target: float | None = None
    for event in log.all(metric):
        if start is None or not is_number(event.value) and not _is_nan(event.value):
            continue
        epoch = _eval_epoch(event, divisor, in_samples)
        point = EvalPoint(
            epoch=round(epoch, 4) if epoch is not None else float("nan"),
            accuracy=float(event.value),
            time_ms=int(event.time_ms - start.time_ms),
        )
        evals.append(point)
        if not reached and goal.reached(point.accuracy) and (stop is None or event.time_ms <= stop.time_ms):
            reached, epochs_to_target = True, epoch  # None: the log counts neither epochs nor samples we can divide
    epochs_seen = [float(e.metadata[C.EPOCH_NUM]) / (divisor if in_samples and divisor else 1)
                   for e in log.events if e.key in (C.EPOCH_STOP, C.EPOCH_START) and C.EPOCH_NUM in e.metadata]
    epochs_run = max([*epochs_seen, *(p.epoch for p in evals if p.epoch == p.epoch)], default=None)
    seed_event = log.first(C.SEED)
    bench = log.first(C.SUBMISSION_BENCHMARK)
    gbs = _positive_int(log.first(C.GLOBAL_BATCH_SIZE))
    division = log.first(C.SUBMISSION_DIVISION)
    settings = log.first(RESOLVED_SETTINGS)
    cuts = log.first(CUTS)
    status, reason = _classify(log, start, stop, goal, evals, reached, epochs_to_target, epochs_run, exit, ended)
    metadata = {e.key: e.value for e in log.events if e.key.startswith(_METADATA_KEYS)}
    if in_samples:
        metadata["epoch_unit"] = "samples"
    return RunRecord(
        status=status,
        reason=reason,
        seed=int(seed_event.value) if seed_event is not None else None,
        benchmark=str(bench.value) if bench else None,
        run_start_ms=_exact(start.time_ms) if start else None,
        run_stop_ms=_exact(stop.time_ms) if stop else None,
        time_to_train_ms=_time_to_train(start, stop),
        epochs_to_target=round(epochs_to_target, 4) if epochs_to_target is not None else None,
        epochs_run=round(epochs_run, 4) if epochs_run is not None else None,
        samples_per_epoch=samples_per_epoch,
        train_samples=train_samples,
        global_batch_size=gbs,
        target=target,
        best_accuracy=goal.best(p.accuracy for p in evals),
        evals=tuple(evals),
        metadata=metadata,
        division=str(division.value) if division is not None and division.value is not None else None,
        division_reason=_text(division.metadata.get(REASON)) if division is not None else None,
        resolved_settings=dict(settings.value) if settings is not None and isinstance(settings.value, dict) else None,
        cuts=_text(cuts.value.get("text")) if cuts is not None and isinstance(cuts.value, dict) else None,
    )


def _is_nan(value: object) -> bool:
    return isinstance(value, float) and value != value


def _text(value: object) -> str | None:
    return " ".join(str(value).split()) if value not in (None, "") else None


def _exact(ms: float) -> int | float:
    """Whole milliseconds as an int, fractions kept (the summarizer subtracts the raw floats)."""
    return int(ms) if float(ms).is_integer() else ms


def _time_to_train(start: Event | None, stop: Event | None) -> int | float | None:
    if start is None or stop is None or stop.time_ms < start.time_ms:
        return None
    return _exact(stop.time_ms - start.time_ms)


def _classify(
    log: ParsedLog,
    start: Event | None,
    stop: Event | None,
    goal: Goal,
    evals: list[EvalPoint],
    reached: bool,
    epochs_to_target: float | None,
    epochs_run: float | None,
    exit: Exit | None,
    ended: RunStatus | None,
) -> tuple[RunStatus, str]:
    if ended in (RunStatus.TIMED_OUT, RunStatus.INTERRUPTED):
        what = "wall-clock limit reached" if ended is RunStatus.TIMED_OUT else "interrupted by the user"
        return ended, what + (f" in epoch {epochs_run:g}" if epochs_run is not None else " before the first epoch")
    if exit is not None and exit.oom_killed:
        return RunStatus.OOM, exit.detail or "killed for lack of memory"
    if exit is not None and exit.code not in (0, None):
        if exit.failed_node:  # one node of a seed across nodes failed: the seed crashed there, whatever the signal
            return RunStatus.CRASHED, exit.detail or f"node {exit.failed_node} failed (exit {exit.code})"
        if exit.code < 0 or exit.code in (137, 143):
            return RunStatus.KILLED, exit.detail or f"killed by a signal (exit {exit.code})"
        return RunStatus.CRASHED, exit.detail or f"exited with status {exit.code}"
    if start is None:
        return RunStatus.CRASHED, "log has no run_start"
    if stop is None:
        return RunStatus.CRASHED, "log has no run_stop (the run ended before it finished)"
    if stop.time_ms < start.time_ms:
        return RunStatus.CRASHED, "run_stop is logged before run_start"
    status = str(stop.metadata.get(C.STATUS, "")).lower()
    metric, target = goal.metric, goal.target
    if status == C.SUCCESS and reached:
        where = f"at epoch {epochs_to_target:g}" if epochs_to_target is not None else "(its epoch unknown)"
        return RunStatus.CONVERGED, f"{metric} reached {target:g} {where}"
    if status == C.SUCCESS:
        return RunStatus.NOT_CONVERGED, f"run_stop says success but no {metric} reached {target:g}"
    if evals and goal.collapsed(evals[-1].accuracy):
        return RunStatus.DIVERGED, f"{metric} collapsed to {evals[-1].accuracy:g} at epoch {evals[-1].epoch:g}"
    best = goal.best(p.accuracy for p in evals)
    best_text = f"best {metric} {text.number(best)}" if best is not None else f"no {metric} logged"
    return RunStatus.NOT_CONVERGED, f"run_stop {status or 'without status'}; {best_text} {goal.short_of} {target:g}"


def require_scorable(log: ParsedLog, source: str) -> None:
    """Fail with one line when a log made elsewhere cannot be scored at all, or carries a value the
    score would rest on that is not usable (NaN or infinite time_ms, an epoch_num that is not a
    number, a seed that is not an integer)."""
    bad = log.bad_values
    if bad:
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        raise LogError(f"{source} line {bad[0].line}: {bad[0].problem}{more}; fix or remove the file")
    start = log.first(C.RUN_START)
    stop = log.first(C.RUN_STOP)
    if not log.events:
        raise LogError(f"{source}: no :::MLLOG lines")
    if start is None:
        raise LogError(f"{source}: run_start not recorded")
    if stop is None:
        raise LogError(f"{source}: run_stop not recorded")
    if stop.time_ms < start.time_ms:
        raise LogError(f"{source}: run_stop ({stop.time_ms:.0f}) is before run_start ({start.time_ms:.0f})")
    if stop.time_ms - start.time_ms > MAX_RUN_MS:
        raise LogError(f"{source}: run_stop is {text.duration(stop.time_ms - start.time_ms)} after run_start (at most "
                       f"{text.duration(MAX_RUN_MS)}): not a time a run took; fix or remove the file")
