"""mlperf_logging's own tools, called the one way mltrain calls them: the compliance checker on one
log, the result summarizer on one benchmark folder, the RCP checker, the package checker (what the
package knows of each benchmark and ruleset: `orchestrator.mlperf.benchmarks`). Nothing here
re-implements a rule; everything MLCommons decides is decided by the package. Its tools report
through the root logger and print: both are kept off the terminal and collected where a verdict
needs the words. Where a tool itself raises on a log it was given (the checkers evaluate rule
strings against whatever the log holds), that becomes its verdict ("the compliance checker failed
on this log: TypeError ..."), never a lost run.

Pinned to mlperf-logging 4.1.68. Private functions used (no public API does the same):
`result_summarizer._compute_strong_score_standalone` (its ``compute_score`` command line crashes in
4.1.68), `result_summarizer._get_scaling_factor`, and the RCP table of `rcp_checker.RCP_Checker`
(``rcp_data``, and its lookup ``_find_rcp``/``_find_top_min_rcp``/``_find_bottom_max_rcp``/
``_create_interp_rcp`` for the reference point of one batch size). Public module functions used:
`mlp_compliance.make_checker/main/rule_choices`, `rcp_checker.check_directory`,
`package_checker.check_systems/check_training_result_files`, `benchmark_meta.get_allowed_benchmarks`.
"""

from __future__ import annotations

import contextlib
import io
import logging
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from orchestrator import signals
from orchestrator.config.reading import SMALL_BYTES, read_json
from orchestrator.errors import UsageError
from orchestrator.mlperf import benchmarks
from orchestrator.mlperf.tool_speed import faster_tools

USAGE = benchmarks.USAGE


@dataclass
class Collected:
    """What a tool logged while it ran."""

    records: list[logging.LogRecord] = field(default_factory=list)

    def messages(self, level: int = logging.WARNING) -> list[str]:
        return [one_line(r.getMessage()) for r in self.records if r.levelno >= level and r.getMessage().strip()]


@contextlib.contextmanager
def quiet_tools() -> Iterator[Collected]:
    """Run mlperf_logging with its log records collected and its prints swallowed: the root
    logger's handlers (a stderr handler that `logging.basicConfig` or an earlier `logging.info`
    installed, say) are set aside for the call and put back after it. Python warnings raised inside
    (numpy's "Mean of empty slice" where a package holds fewer results than a score needs) are
    collected as DEBUG records, not printed with the tool's file paths. A stop signal is held until
    the tool returns (`signals.held`): its bare ``except:`` clauses would take it for a failed rule.
    Two of its steps run faster, their output unchanged (`tool_speed`)."""
    collected = Collected()

    class _Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            collected.records.append(record)

    root = logging.getLogger()
    saved_handlers, saved_level = root.handlers[:], root.level
    root.handlers = [_Keep(level=logging.INFO)]
    root.setLevel(logging.INFO)
    try:
        with signals.held(), contextlib.redirect_stdout(io.StringIO()), faster_tools(), \
                warnings.catch_warnings(record=True) as raised:
            warnings.simplefilter("always")
            yield collected
    finally:
        root.handlers = saved_handlers
        root.setLevel(saved_level)
    collected.records += [logging.LogRecord("warnings", logging.DEBUG, w.filename, w.lineno,
                                            f"{w.category.__name__}: {w.message}", None, None) for w in raised]


def one_line(text: str, limit: int = 240) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


# ---------------------------------------------------------------- compliance


@dataclass(frozen=True)
class CheckerReport:
    """The compliance checker's verdict on one log, as the result summarizer takes it."""

    valid: bool
    errors: tuple[str, ...]
    """Its messages that fail the log (flattened to one line each)."""
    errors_by_key: dict[str, str]
    """The keyed ones (a failed CHECK of a key), key -> message."""
    warnings_by_key: dict[str, str]
    """What it only warns about (a key logged more than once with the same value)."""


def compliance(path: Path, ruleset: str) -> CheckerReport:
    """`mlp_compliance.main` on one file in the summarizer's mode (warnings are not errors); the
    warnings are kept apart so that a caller can be stricter than the summarizer about them."""
    from mlperf_logging.compliance_checker import mlp_compliance

    checker = mlp_compliance.make_checker(usage=USAGE, ruleset=ruleset, quiet=False, werror=False)
    try:
        with quiet_tools():
            valid, _, _, _ = mlp_compliance.main(str(path), f"{USAGE}_{ruleset}/common.yaml", checker)
    except Exception as exc:  # noqa: BLE001  (the checker's crash on this log is its verdict)
        mlp_compliance.enqueued_configs.clear()  # module state the crash left behind
        return CheckerReport(valid=False, errors=(f"the compliance checker failed on this log: {_failure(exc)}",),
                             errors_by_key={}, warnings_by_key={})
    keyed = {key: _message(text) for key, text in checker.overwritable.items()}
    errors = (*keyed.values(), *(_message(text) for text in checker.not_overwritable))
    return CheckerReport(valid=bool(valid), errors=tuple(errors), errors_by_key=keyed,
                         warnings_by_key={key: _message(text) for key, text in checker.warnings.items()})


def _failure(exc: BaseException) -> str:
    return one_line(f"{type(exc).__name__}: {exc}", 160)


def _message(text: str) -> str:
    """A checker message in one line: its first line and the failed test, without the state dump."""
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    if not lines:
        return ""
    kept = [lines[0]] + [line for line in lines[1:] if line.startswith("failed test:")]
    return one_line(" ".join(kept))


# ---------------------------------------------------------------- the result summarizer


class ToolFailed(Exception):
    """An mlperf_logging tool raised on the files it was given; the message says which and why."""


def summarizer_score(folder: Path, benchmark: str, ruleset: str) -> tuple[float | None, dict[str, float], float]:
    """The result summarizer on one benchmark folder (``result_*.txt`` and maybe ``scaling.json``):
    its score in minutes (scaling factor applied), the minutes of each file it accepted, and the
    scaling factor it read. `ToolFailed` when the summarizer itself raises."""
    from mlperf_logging.compliance_checker import mlp_compliance
    from mlperf_logging.result_summarizer import result_summarizer

    try:
        with quiet_tools():
            accepted, _, score, _, factor = result_summarizer._compute_strong_score_standalone(
                benchmark, folder.parent.name, False, str(folder), USAGE, ruleset, return_full_scores=True,
            )
    except Exception as exc:  # noqa: BLE001  (reported as the summarizer's failure, not ours)
        mlp_compliance.enqueued_configs.clear()
        raise ToolFailed(f"the result summarizer failed on {folder}: {_failure(exc)}") from None
    return score, dict(accepted), float(factor)


def scaling_factor(folder: Path) -> float | None:
    """``scaling.json``'s factor as the summarizer reads it; None when the folder has none."""
    from mlperf_logging.result_summarizer import result_summarizer

    path = folder / "scaling.json"
    if not path.is_file():
        return None
    must = "it must hold {\"scaling_factor\": <number>}"
    try:
        read_json(path, max_bytes=SMALL_BYTES)  # bounded first: the summarizer reads it without bounds
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path}: not a scaling.json ({one_line(str(exc), 80)}); {must}") from None
    try:
        with quiet_tools():
            value = result_summarizer._get_scaling_factor(str(folder))
    except (ValueError, KeyError, TypeError, OSError) as exc:
        raise UsageError(f"{path}: not a scaling.json ({type(exc).__name__}: {one_line(str(exc), 80)}); {must}") \
            from None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < float("inf"):
        raise UsageError(f"{path}: scaling_factor {value!r} is not a positive number")
    return float(value)


# ---------------------------------------------------------------- RCP


@dataclass(frozen=True)
class RcpOutcome:
    """What `rcp_checker.check_directory` said, and the table it compared with."""

    passed: bool
    message: str
    factor: float
    """The normalisation factor it wrote into scaling.json (1.0 when it wrote none)."""
    table_batch_sizes: tuple[int, ...]
    counts_samples: bool
    """The ruleset's table for this benchmark counts epochs in samples."""


def rcp_table(benchmark: str, ruleset: str) -> tuple[tuple[int, ...], bool]:
    """The batch sizes the ruleset's RCP table has for the benchmark, and whether it counts samples;
    ((), False) when the ruleset has no table for it."""
    from mlperf_logging.rcp_checker import rcp_checker

    if not benchmarks.is_known(benchmark) or ruleset not in benchmarks.get(benchmark).rcp_rulesets:
        return (), False
    try:
        with quiet_tools():
            checker = rcp_checker.RCP_Checker(USAGE, ruleset, benchmark, False)
    except (OSError, KeyError, ValueError):
        return (), False
    sizes = tuple(sorted(int(r["BS"]) for r in checker.rcp_data.values()))
    return sizes, benchmarks.get(benchmark).rcp_counts_samples(ruleset)


@dataclass(frozen=True)
class RcpPoint:
    """The reference convergence point the RCP checker holds one batch size to, in the table's unit."""

    batch_size: int
    how: str
    """'RCP found' or 'RCP Interpolation' (between the neighbouring batch sizes), the checker's words."""
    mean: float
    """Olympic mean of the reference runs' epochs (or samples) to converge."""
    stdev: float
    """Their standard deviation (numpy's, over all reference runs, as the checker computes it)."""
    min_mean: float
    """The lowest mean the checker accepts (its one-sided t-test at alpha 0.05): faster fails."""
    runs: int
    """Reference runs behind the point (the checker's count for an interpolated one)."""
    counts_samples: bool


def rcp_point(benchmark: str, ruleset: str, batch_size: int) -> RcpPoint | None:
    """The pruned RCP the checker compares a submission of ``batch_size`` with (found, or
    interpolated between its neighbours); None where it has none (no table, or the batch size lies
    outside the table's range)."""
    from mlperf_logging.rcp_checker import rcp_checker

    sizes, samples = rcp_table(benchmark, ruleset)
    if not sizes:
        return None
    with quiet_tools():
        checker = rcp_checker.RCP_Checker(USAGE, ruleset, benchmark, False)
        record, how = checker._find_rcp(batch_size, "pruned_rcps"), "RCP found"
        if record is None:
            low = checker._find_top_min_rcp(batch_size, "pruned_rcps")
            high = checker._find_bottom_max_rcp(batch_size, "pruned_rcps")
            if low is None or high is None:
                return None
            _, record = checker._create_interp_rcp(batch_size, low, high)
            how = "RCP Interpolation"
    runs = len(record["Epochs to converge"]) or checker.submission_runs * 2
    return RcpPoint(batch_size=batch_size, how=how, mean=float(record["RCP Mean"]), stdev=float(record["RCP Stdev"]),
                    min_mean=float(record["Min Epochs"]), runs=runs, counts_samples=samples)


def rcp_check(folder: Path, benchmark: str, ruleset: str) -> RcpOutcome:
    """`rcp_checker.check_directory` on a folder of result files, as the package checker and the
    summarizer run it (pruned RCPs, no bypass); it writes ``scaling.json`` there when the runs
    converge faster than the RCP mean but within the allowed speedup."""
    from mlperf_logging.rcp_checker import rcp_checker

    sizes, samples = rcp_table(benchmark, ruleset)
    try:
        with quiet_tools():
            passed, message, _ = rcp_checker.check_directory(
                str(folder), USAGE, ruleset, False, False, rcp_file=None, rcp_pass="pruned_rcps", rcp_bypass=False,
                set_scaling=True,
            )
    except Exception as exc:  # noqa: BLE001  (its crash on these logs is its verdict)
        (folder / "scaling.json").unlink(missing_ok=True)
        passed, message = False, f"the RCP checker failed on these logs: {_failure(exc)}"
    written = scaling_factor(folder)
    return RcpOutcome(passed=bool(passed), message=one_line(message), factor=written or 1.0,
                      table_batch_sizes=sizes, counts_samples=samples)


# ---------------------------------------------------------------- the package checker


def package_check(root: Path, ruleset: str) -> tuple[bool, tuple[str, ...]]:
    """mlperf_logging's package checker on a submission-layout folder (system descriptions, result
    files, seeds, RCP): its verdict and the errors it logged."""
    from mlperf_logging.compliance_checker import mlp_compliance
    from mlperf_logging.package_checker import package_checker

    try:
        with quiet_tools() as collected:
            systems = package_checker.check_systems(str(root), USAGE, ruleset)
            results = package_checker.check_training_result_files(
                str(root), USAGE, ruleset, quiet=True, werror=False, rcp_bypass=False, rcp_bert_train_samples=False,
                seed_checker_bypass=False,
            )
    except Exception as exc:  # noqa: BLE001  (its crash on this export is its verdict)
        mlp_compliance.enqueued_configs.clear()
        return False, (f"the package checker failed on {root}: {_failure(exc)}",)
    errors = tuple(collected.messages(logging.ERROR))[:5]
    return bool(systems and results), errors
