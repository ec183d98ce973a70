"""Read ``:::MLLOG`` lines into a `RunRecord`.

The one module that reads ``:::MLLOG`` text: whole logs (`parse_lines`, `parse_file`), single
lines as they stream in (`parse_line`), and the bare MLLOG lines of an output for MLCommons'
tools (`mllog_lines`). Whole logs are split out with `mlperf_logging`'s own parser (it strips
prefixes such as ``0: `` and skips non-MLLOG output); a line that does not parse (a truncated last
line, say) is collected as an error, not fatal. Keys are `mlperf_logging.mllog.constants`.
Epoch numbers may be logged as epochs or as samples (NVIDIA's logs): both become epochs here.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from mlperf_logging.compliance_checker.mlp_parser.ruleset_400 import strip_and_dedup
from mlperf_logging.mllog import constants as C

from orchestrator.errors import LogError
from orchestrator.results.records import EvalPoint, Exit, RunRecord, RunStatus

MLLOG_PREFIX = ":::MLLOG"
SAMPLES_PER_EPOCH = "samples_per_epoch"
"""Not an mllog constant: some implementations log it when an epoch differs from train_samples."""
EpochUnit = Literal["auto", "epochs", "samples"]
DIVERGENCE_ACCURACY = 1e-6
_METADATA_KEYS = ("submission_", "opt_", "lars_", "sgd_", "model_", "oversampling", "training_input_shape",
                  "validation_input_shape", "validation_overlap", "gradient_accumulation_steps",
                  C.TRAIN_SAMPLES, C.EVAL_SAMPLES, "number_of_nodes", "accelerators_per_node")


@dataclass(frozen=True)
class Event:
    key: str
    value: Any
    metadata: dict[str, Any]
    time_ms: float


@dataclass(frozen=True)
class ParsedLog:
    events: tuple[Event, ...]
    errors: tuple[str, ...]
    """Lines that looked like MLLOG but did not parse, with the reason."""

    def first(self, key: str) -> Event | None:
        return next((e for e in self.events if e.key == key), None)

    def all(self, key: str) -> list[Event]:
        return [e for e in self.events if e.key == key]


def parse_line(line: str) -> Event:
    """One ``:::MLLOG {json}`` line (anything before the prefix is ignored) as an event; ValueError,
    KeyError or TypeError when it is not one."""
    at = line.find(MLLOG_PREFIX)
    if at < 0:
        raise ValueError("not an MLLOG line")
    raw = json.loads(line[at + len(MLLOG_PREFIX):])
    return Event(key=str(raw["key"]), value=raw.get("value"), metadata=dict(raw.get("metadata") or {}),
                 time_ms=float(raw["time_ms"]))


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
    errors: list[str] = []
    for line in strip_and_dedup(lines):
        text = line.strip()
        try:
            events.append(parse_line(text))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            errors.append(f"{text[:80]!r}: {type(exc).__name__}")
    return ParsedLog(tuple(events), tuple(errors))


def parse_file(path: Path) -> ParsedLog:
    try:
        with path.open(encoding="utf-8", errors="replace") as handle:
            return parse_lines(handle)
    except OSError as exc:
        raise LogError(f"{path}: cannot read log: {exc.strerror}") from None


def _samples_per_epoch(log: ParsedLog) -> int | None:
    for key in (SAMPLES_PER_EPOCH, C.TRAIN_SAMPLES):
        event = log.first(key)
        if event is not None and isinstance(event.value, int | float) and event.value > 0:
            return int(event.value)
    return None


def _epochs_are_samples(log: ParsedLog, samples_per_epoch: int | None) -> bool:
    """Decide whether ``epoch_num`` counts samples: blocks counted in samples and an eval epoch
    number on the samples scale of the block before it."""
    if samples_per_epoch is None:
        return False
    block_samples: float | None = None
    verdict = False
    for event in log.events:
        if event.key == C.BLOCK_START and C.SAMPLES_COUNT in event.metadata and C.EPOCH_COUNT not in event.metadata:
            block_samples = float(event.metadata[C.SAMPLES_COUNT])
        elif event.key == C.EVAL_ACCURACY and C.EPOCH_NUM in event.metadata and block_samples is not None:
            epoch_num = float(event.metadata[C.EPOCH_NUM])
            if block_samples >= samples_per_epoch:
                verdict = epoch_num >= block_samples
            elif block_samples == 0:
                verdict = epoch_num >= samples_per_epoch and epoch_num % samples_per_epoch == 0
    return verdict


def _eval_epoch(event: Event, samples_per_epoch: int | None, in_samples: bool) -> float | None:
    meta = event.metadata
    if C.EPOCH_NUM in meta:
        value = float(meta[C.EPOCH_NUM])
        return value / samples_per_epoch if in_samples and samples_per_epoch else value
    if C.SAMPLES_COUNT in meta and samples_per_epoch:
        return float(meta[C.SAMPLES_COUNT]) / samples_per_epoch
    return None


def build_record(
    log: ParsedLog,
    *,
    target: float,
    metric: str = C.EVAL_ACCURACY,
    exit: Exit | None = None,
    ended: RunStatus | None = None,
    epoch_unit: EpochUnit = "auto",
) -> RunRecord:
    """Derive one run's record. ``exit`` is how the process ended when we ran it; ``ended``
    overrides the status when the orchestrator itself stopped the run (timeout, Ctrl-C)."""
    start = log.first(C.RUN_START)
    stop = log.first(C.RUN_STOP)
    spe = _samples_per_epoch(log)
    in_samples = epoch_unit == "samples" or (epoch_unit == "auto" and _epochs_are_samples(log, spe))
    evals: list[EvalPoint] = []
    epochs_to_target: float | None = None
    for event in log.all(metric):
        if start is None or not isinstance(event.value, int | float):
            continue
        epoch = _eval_epoch(event, spe, in_samples)
        point = EvalPoint(
            epoch=round(epoch, 4) if epoch is not None else float("nan"),
            accuracy=float(event.value),
            time_ms=int(event.time_ms - start.time_ms),
        )
        evals.append(point)
        if epochs_to_target is None and point.accuracy >= target and (stop is None or event.time_ms <= stop.time_ms):
            epochs_to_target = epoch
    epochs_seen = [float(e.metadata[C.EPOCH_NUM]) / (spe if in_samples and spe else 1)
                   for e in log.events if e.key in (C.EPOCH_STOP, C.EPOCH_START) and C.EPOCH_NUM in e.metadata]
    epochs_run = max([*epochs_seen, *(p.epoch for p in evals if p.epoch == p.epoch)], default=None)
    seed_event = log.first(C.SEED)
    bench = log.first(C.SUBMISSION_BENCHMARK)
    gbs = log.first(C.GLOBAL_BATCH_SIZE)
    status, reason = _classify(log, start, stop, target, metric, evals, epochs_to_target, epochs_run, exit, ended)
    metadata = {e.key: e.value for e in log.events if e.key.startswith(_METADATA_KEYS)}
    if in_samples:
        metadata["epoch_unit"] = "samples"
    return RunRecord(
        status=status,
        reason=reason,
        seed=int(seed_event.value) if seed_event and isinstance(seed_event.value, int | float) else None,
        benchmark=str(bench.value) if bench else None,
        run_start_ms=int(start.time_ms) if start else None,
        run_stop_ms=int(stop.time_ms) if stop else None,
        time_to_train_ms=_time_to_train(start, stop),
        epochs_to_target=round(epochs_to_target, 4) if epochs_to_target is not None else None,
        epochs_run=round(epochs_run, 4) if epochs_run is not None else None,
        samples_per_epoch=spe,
        global_batch_size=int(gbs.value) if gbs and isinstance(gbs.value, int | float) else None,
        target=target,
        best_accuracy=max((p.accuracy for p in evals), default=None),
        evals=tuple(evals),
        metadata=metadata,
    )


def _time_to_train(start: Event | None, stop: Event | None) -> int | None:
    if start is None or stop is None or stop.time_ms < start.time_ms:
        return None
    return int(stop.time_ms - start.time_ms)


def _classify(
    log: ParsedLog,
    start: Event | None,
    stop: Event | None,
    target: float,
    metric: str,
    evals: list[EvalPoint],
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
    if status == C.SUCCESS and epochs_to_target is not None:
        return RunStatus.CONVERGED, f"{metric} reached {target:g} at epoch {epochs_to_target:g}"
    if status == C.SUCCESS:
        return RunStatus.NOT_CONVERGED, f"run_stop says success but no {metric} reached {target:g}"
    if evals and evals[-1].accuracy < DIVERGENCE_ACCURACY:
        return RunStatus.DIVERGED, f"{metric} collapsed to {evals[-1].accuracy:g} at epoch {evals[-1].epoch:g}"
    best = max((p.accuracy for p in evals), default=None)
    best_text = f"best {metric} {best:.4g}" if best is not None else f"no {metric} logged"
    return RunStatus.NOT_CONVERGED, f"run_stop {status or 'without status'}; {best_text} < {target:g}"


def require_scorable(log: ParsedLog, source: str) -> None:
    """Fail with one line when a log cannot be scored at all (for logs made elsewhere)."""
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
