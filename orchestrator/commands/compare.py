"""``mltrain compare``: setups side by side, with intervals, tests and the hardware/luck split."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from orchestrator.commands.common import JSON_OPTION, RESULTS_OPTION, WIDE_OPTION, open_store, output
from orchestrator.errors import UsageError
from orchestrator.output import Output

if TYPE_CHECKING:
    from orchestrator.results.store import Store


FORCE_HELP = "Compare setups of different profiles (or a smoke run beside published results) anyway."


def register(app: typer.Typer) -> None:
    app.command("compare", short_help="Compare setups, or published results, side by side.")(compare_runs)


def compare_runs(
    ctx: typer.Context,
    runs: list[str] = typer.Argument(None, metavar="[RUN]...", help="Run ids; runs sharing a label form one setup."),
    label: list[str] = typer.Option(None, "--label", metavar="LABEL",
        help="Add every run carrying this label (repeatable)."),
    baseline: str = typer.Option(None, "--baseline", help="Setup to compare against (default: the first)."),
    cost_per_hour: list[str] = typer.Option(
        None, "--cost-per-hour", metavar="RATE|SETUP=RATE",
        help="Price per hour: RATE for every setup, or SETUP=RATE (repeatable)."),
    published: list[str] = typer.Option(
        None, "--published", metavar="QUERY",
        help="A published MLPerf result beside yours, or beside another (repeatable; no run needed):"
             " BENCHMARK[:ACCELERATOR[:COUNT]][@ROUND] (unet3d:H100:8@4.0), a submitter's system"
             " (unet3d:eos_ngc24.04_mxnet), or auto (like each of your setups). Each query stands for one"
             " result: of the latest round (or ROUND), the median score; the output says which and why."),
    per_accelerator: bool = typer.Option(False, "--per-accelerator",
                                         help="Also show accelerator-minutes and samples/s per accelerator."),
    force: bool = typer.Option(False, "--force", help=FORCE_HELP),
    results: Path = RESULTS_OPTION,
    wide: bool = WIDE_OPTION,
    as_json: bool = JSON_OPTION,
    as_csv: bool = typer.Option(False, "--csv", help="One CSV line per setup on stdout."),
) -> None:
    """Compare setups: what differs between them and whether their hosts were quiet, then olympic
    time-to-train with intervals, speedup, Welch tests, energy, cost; beside published MLPerf results
    with --published, or published results alone (--published twice, no run). Setups of different
    profiles are refused (exit 2) unless --force."""
    from orchestrator.insight import compare as comparing
    from orchestrator.insight.published_setups import published_beside
    from orchestrator.insight.runs import check_profiles, load_setups
    from orchestrator.render.comparison import comparison_tables, csv_text, facts_table, runs_text
    from orchestrator.render.convergence import convergence_table, sentences
    from orchestrator.render.verdicts import host_line, verdict

    out = output(ctx)
    if as_json and as_csv:
        raise UsageError("choose one of --json and --csv")
    store = open_store(results, write=False)
    from orchestrator.inference.compare import wants_inference
    from orchestrator.insight.runs import chosen_runs

    if not (runs or label or published):
        raise UsageError("name at least one run (RUN...) or --label, or published results (--published QUERY,"
                         " twice to compare two)")
    setups = []
    chosen: list[str] = []
    runners: dict[str, str | None] = {}
    if runs or label:
        chosen, listing = chosen_runs(store, runs or [], label or [])
        runners = {row["run_id"]: row.get("runner") for row in listing.rows}
        if wants_inference(chosen, listing):
            compare_inference(out, store, chosen, baseline, as_json=as_json, as_csv=as_csv)
            return
        setups = load_setups(store, chosen, listing)
    matched: list[str] = []
    if published:
        beside, matched = published_beside(setups, published)
        setups += beside
    if not setups:
        raise UsageError("nothing to compare: " + "; ".join(matched))
    prices = parse_prices(cost_per_hour or [], [s.name for s in setups])
    check_profiles(setups, force=force)
    try:
        result = comparing.compare(setups, baseline=baseline, cost_per_hour=prices)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if as_json:
        facts = {"facts": {setup.name: setup.facts for setup in setups}}
        out.json({**result.to_json(), **facts, **({"published": matched} if published else {})})
        return
    if as_csv:
        out.data(csv_text(result).rstrip("\n"))
        return
    width = None if wide else out.out.width
    differences, shared = facts_table(setups, width)
    if differences is not None:
        out.table(differences.table, width=differences.width)
    if shared:
        out.prose(shared)
    for row in result.rows:
        out.prose(host_line(row))
    notes = []
    for fitted in comparison_tables(result, with_cost=bool(prices), width=width, per_accelerator=per_accelerator):
        out.table(fitted.table, width=fitted.width)
        notes += [fitted.note()] if fitted.note() and fitted.note() not in notes else []
    for note in notes:
        out.prose(note)
    rcp_table = convergence_table(result, width)
    if rcp_table is not None:
        out.table(rcp_table.table, width=rcp_table.width)
        if rcp_table.note():
            out.prose(rcp_table.note())
    for sentence in matched:
        out.prose(f"published: {sentence}")
    if any(row.published for row in result.rows):
        out.prose("published results are MLCommons' (training_results_<round>), recomputed from their per-run"
                  " times in mltrain's table; they were not run here")
    for row in result.rows:
        out.prose(f"{row.name}: {row.hardware}; {runs_text(row.run_ids)}")
    for row in result.rows:
        if row.name != result.baseline:
            out.prose(verdict(row, result))
    for sentence in sentences(result):
        out.prose(sentence)
    from orchestrator.insight import scaling  # runs on other node counts: their scaling efficiency

    for sentence in scaling.sentences_for(store, chosen, runners):
        out.prose(sentence)
    for row in result.rows:
        for note in row.notes:
            out.warning(f"{row.name}: {note}")


def compare_inference(out: Output, store: Store, chosen: list[str], baseline: str | None, *,
                      as_json: bool, as_csv: bool) -> None:
    """Inference setups: the scenario's metric over repeated runs, its interval, the ratio to the baseline."""
    from orchestrator.inference import compare as comparing
    from orchestrator.render.comparison import csv_rows
    from orchestrator.render.inference import comparison_notes, comparison_rows, comparison_table

    result = comparing.compare(comparing.load(store, chosen), baseline=baseline)
    rows = comparison_rows(result)
    if as_json:
        out.json({"model": result.model, "scenario": result.scenario, "profile": result.profile,
                  "metric": result.metric, "baseline": result.baseline, "rows": rows})
        return
    if as_csv:
        out.data(csv_rows([k for k in rows[0] if k != "run_ids"], rows).rstrip("\n"))
        return
    out.table(comparison_table(result))
    for note in comparison_notes(result):
        out.prose(note)


def parse_prices(values: list[str], setups: list[str]) -> dict[str, float]:
    prices: dict[str, float] = {}
    for value in values:
        name, sep, rate = value.rpartition("=")
        try:
            price = float(rate)
        except ValueError:
            raise UsageError(f"--cost-per-hour {value!r}: give RATE or SETUP=RATE with a number") from None
        if not math.isfinite(price):
            raise UsageError(f"--cost-per-hour {value!r}: give a finite number")
        if price < 0:
            raise UsageError(f"--cost-per-hour {value!r}: the price must not be negative")
        if not sep:
            prices.update({setup: price for setup in setups if setup not in prices})
        elif name not in setups:
            raise UsageError(f"--cost-per-hour {value!r}: no setup {name!r} (setups: {', '.join(setups)})")
        else:
            prices[name] = price
    return prices
