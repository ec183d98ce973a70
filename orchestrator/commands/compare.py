"""``mltrain compare``: setups side by side, with intervals, tests and the hardware/luck split."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from pathlib import Path

import typer
from rich import box
from rich.table import Table

from orchestrator.commands.common import JSON_OPTION, RESULTS_OPTION, results_dir
from orchestrator.errors import UsageError
from orchestrator.insight import compare as comparing
from orchestrator.insight.compare import number_text, seeds_needed_text
from orchestrator.insight.runs import load_runs, to_setups
from orchestrator.output import Output


def register(app: typer.Typer) -> None:
    app.command("compare")(compare_runs)


def compare_runs(
    runs: list[str] = typer.Argument(None, help="Run ids; runs sharing a label form one setup."),
    label: list[str] = typer.Option(None, "--label", help="Add every run carrying this label (repeatable)."),
    baseline: str = typer.Option(None, "--baseline", help="Setup to compare against (default: the first)."),
    cost_per_hour: list[str] = typer.Option(
        None, "--cost-per-hour", help="Price per hour: RATE for every setup, or SETUP=RATE (repeatable)."
    ),
    results: Path = RESULTS_OPTION,
    as_json: bool = JSON_OPTION,
    as_csv: bool = typer.Option(False, "--csv", help="One CSV line per setup on stdout."),
) -> None:
    """Compare setups: olympic time-to-train with intervals, speedup, Welch tests, energy, cost."""
    out = Output()
    if as_json and as_csv:
        raise UsageError("choose one of --json and --csv")
    views = load_runs(results_dir(results), runs or [], label or [])
    setups = to_setups(views)
    prices = parse_prices(cost_per_hour or [], [s.name for s in setups])
    try:
        result = comparing.compare(setups, baseline=baseline, cost_per_hour=prices)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if as_json:
        out.json(result.to_json())
        return
    if as_csv:
        out.data(csv_text(result).rstrip("\n"))
        return
    out.table(main_table(result, bool(prices)))
    out.table(split_table(result))
    for row in result.rows:
        out.data(f"{row.name}: {row.hardware}; runs {', '.join(row.run_ids)}")
    for row in result.rows:
        if row.name != result.baseline:
            out.data(comparing.verdict(row, result.baseline))
    for row in result.rows:
        for note in row.notes:
            out.warning(f"{row.name}: {note}")


def parse_prices(values: list[str], setups: list[str]) -> dict[str, float]:
    prices: dict[str, float] = {}
    for value in values:
        name, sep, rate = value.rpartition("=")
        try:
            price = float(rate)
        except ValueError:
            raise UsageError(f"--cost-per-hour {value!r}: give RATE or SETUP=RATE with a number") from None
        if price < 0:
            raise UsageError(f"--cost-per-hour {value!r}: the price must not be negative")
        if not sep:
            prices.update({setup: price for setup in setups if setup not in prices})
        elif name not in setups:
            raise UsageError(f"--cost-per-hour {value!r}: no setup {name!r} (setups: {', '.join(setups)})")
        else:
            prices[name] = price
    return prices


def csv_text(result: comparing.Comparison) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(comparing.CSV_COLUMNS), lineterminator="\n")
    writer.writeheader()
    for row in result.rows:
        writer.writerow({k: "" if v is None else v for k, v in comparing.flat_row(row).items()})
    return buffer.getvalue()


def main_table(result: comparing.Comparison, with_cost: bool) -> Table:
    table = Table(title=f"time-to-train (baseline: {result.baseline})", box=box.SIMPLE_HEAD)
    for column in ("setup", "ok/n", "olympic TTT [95% CI]", "speedup [95% CI]", "Welch p", "seeds needed",
                   "epochs", "energy"):
        table.add_column(column)
    if with_cost:
        table.add_column("cost")
    for row in result.rows:
        cells = [
            row.name, f"{row.converged}/{row.n}",
            duration(row.olympic_ms.value) + bracket(row.olympic_ms, duration),
            "baseline" if row.speedup is None
            else number_text(row.speedup.value, "x") + bracket(row.speedup, number_text),
            p_text(row.ttt_test), seeds_needed_text(row.ttt_test),
            number_text(row.epochs_to_target.mean.value), energy_text(row.energy_j),
        ]
        if with_cost:
            cells.append(number_text(row.cost))
        table.add_row(*cells)
    return table


def split_table(result: comparing.Comparison) -> Table:
    table = Table(title="time-to-train = epochs-to-target (convergence luck) x seconds per epoch (hardware)",
                  box=box.SIMPLE_HEAD)
    for column in ("setup", "quantity", "mean [95% CI]", "CV", "vs baseline [95% CI]", "Welch p", "seeds needed"):
        table.add_column(column)
    for row in result.rows:
        for name, quantity in (("time-to-train s", row.time_to_train_s),
                               ("epochs-to-target", row.epochs_to_target),
                               ("s per epoch", row.seconds_per_epoch),
                               ("samples per s", row.samples_per_second)):
            ratio = "-"
            if quantity.ratio is not None:
                ratio = number_text(quantity.ratio.value, "x") + bracket(quantity.ratio, number_text)
            table.add_row(
                row.name, name, number_text(quantity.mean.value) + bracket(quantity.mean, number_text),
                percent(quantity.cv), ratio, p_text(quantity.test), seeds_needed_text(quantity.test),
            )
    return table


def duration(ms: float | None) -> str:
    if ms is None:
        return "-"
    seconds = ms / 1000
    return f"{seconds:.3g} s" if seconds < 120 else f"{seconds / 60:.4g} min"


def percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def bracket(interval: comparing.Interval, fmt: Callable[[float | None], str]) -> str:
    if interval.low is None and interval.high is None:
        return ""
    low = fmt(interval.low) if interval.low is not None else "?"
    high = fmt(interval.high) if interval.high is not None else "?"
    return f" [{low}, {high}]"


def p_text(test: comparing.Test | None) -> str:
    if test is None:
        return "-"
    if test.p_value is None:
        return "n/a"
    return f"{test.p_value:.2g}" + (" *" if test.significant else "")


def energy_text(joules: float | None) -> str:
    if joules is None:
        return "-"
    return f"{joules / 3.6e6:.3g} kWh" if joules >= 3.6e5 else f"{joules / 1000:.3g} kJ"
