"""A comparison as people and other tools read it: the terminal tables, CSV lines and one
verdict sentence per setup (the HTML report draws its table from the same cells)."""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from typing import Any

from orchestrator import text
from orchestrator.config.profiles import MLPERF, SMOKE
from orchestrator.insight.compare import Comparison, Quantity, Setup, SetupRow
from orchestrator.insight.setup_facts import UNKNOWN, sorted_facts, unknown_to
from orchestrator.insight.statistics import Test
from orchestrator.render.fit import Col, Fitted, fit
from orchestrator.render.tables import caveat

CSV_COLUMNS = (
    "setup", "hardware", "runs", "n", "converged", "valid", "olympic_ttt_ms", "olympic_ttt_ci_low_ms",
    "olympic_ttt_ci_high_ms", "speedup", "speedup_ci_low", "speedup_ci_high", "ttt_welch_p", "ttt_seeds_needed",
    "epochs_to_target_mean", "epochs_to_target_cv", "epochs_ratio", "epochs_welch_p", "epochs_seeds_needed",
    "seconds_per_epoch_mean", "seconds_per_epoch_cv", "seconds_per_epoch_ratio", "seconds_per_epoch_welch_p",
    "seconds_per_epoch_seeds_needed", "samples_per_second_mean", "samples_per_second_ratio",
    "samples_per_second_welch_p", "energy_to_train_j", "cost_to_train", "scaling_factor", "mlperf_score_ms",
    "published", "accelerators", "accelerator_minutes", "samples_per_second_per_accelerator",
    "profile", "host", "seeds_disturbed", "attributable", "differs",
)


def flat_row(row: SetupRow) -> dict[str, Any]:
    """One CSV line per setup (columns CSV_COLUMNS)."""
    def test(t: Test | None, key: str) -> Any:
        return getattr(t, key) if t is not None else None

    def ratio(q: Quantity) -> float | None:
        return q.ratio.value if q.ratio is not None else None

    return {
        "setup": row.name, "hardware": row.hardware, "runs": " ".join(row.run_ids), "n": row.n,
        "converged": row.converged, "valid": row.valid,
        "olympic_ttt_ms": row.olympic_ms.value, "olympic_ttt_ci_low_ms": row.olympic_ms.low,
        "olympic_ttt_ci_high_ms": row.olympic_ms.high,
        "speedup": row.speedup.value if row.speedup else None,
        "speedup_ci_low": row.speedup.low if row.speedup else None,
        "speedup_ci_high": row.speedup.high if row.speedup else None,
        "ttt_welch_p": test(row.ttt_test, "p_value"), "ttt_seeds_needed": test(row.ttt_test, "seeds_needed"),
        "epochs_to_target_mean": row.epochs_to_target.mean.value, "epochs_to_target_cv": row.epochs_to_target.cv,
        "epochs_ratio": ratio(row.epochs_to_target), "epochs_welch_p": test(row.epochs_to_target.test, "p_value"),
        "epochs_seeds_needed": test(row.epochs_to_target.test, "seeds_needed"),
        "seconds_per_epoch_mean": row.seconds_per_epoch.mean.value, "seconds_per_epoch_cv": row.seconds_per_epoch.cv,
        "seconds_per_epoch_ratio": ratio(row.seconds_per_epoch),
        "seconds_per_epoch_welch_p": test(row.seconds_per_epoch.test, "p_value"),
        "seconds_per_epoch_seeds_needed": test(row.seconds_per_epoch.test, "seeds_needed"),
        "samples_per_second_mean": row.samples_per_second.mean.value,
        "samples_per_second_ratio": ratio(row.samples_per_second),
        "samples_per_second_welch_p": test(row.samples_per_second.test, "p_value"),
        "energy_to_train_j": row.energy_j, "cost_to_train": row.cost,
        "scaling_factor": row.scaling_factor, "mlperf_score_ms": row.mlperf_score_ms.value, "published": row.published,
        "accelerators": row.per_accelerator.accelerators if row.per_accelerator else None,
        "accelerator_minutes": row.per_accelerator.accelerator_minutes if row.per_accelerator else None,
        "samples_per_second_per_accelerator": row.per_accelerator.samples_per_second if row.per_accelerator else None,
        "profile": row.profile, "host": row.host.verdict if row.host is not None else None,
        "seeds_disturbed": row.host.disturbed if row.host is not None else None,
        "attributable": row.attributable, "differs": "; ".join(row.differs),
    }


def csv_text(result: Comparison) -> str:
    return csv_rows(list(CSV_COLUMNS), [flat_row(row) for row in result.rows])


def csv_rows(columns: list[str], rows: Sequence[Mapping[str, object]]) -> str:
    """CSV with a header, each cell as a spreadsheet shows it (`spreadsheet_safe`); extra keys ignored."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n", extrasaction="ignore")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: spreadsheet_safe(v) for k, v in row.items()})
    return buffer.getvalue()


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
"""What makes a spreadsheet read a text cell as a formula (OWASP's CSV injection list)."""


def spreadsheet_safe(value: object) -> object:
    """A CSV cell a spreadsheet shows as it is: text starting like a formula gets a leading
    apostrophe (numbers stay numbers, a negative one included); None is an empty cell."""
    if value is None:
        return ""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def scaled_anywhere(result: Comparison) -> bool:
    """Some setup's score is scaled by an RCP factor: show the MLPerf score beside the olympic mean."""
    return any(row.scaling_factor != 1.0 for row in result.rows)


def mlperf_score(row: SetupRow) -> str:
    """'12.1 min (x1.011)' where a scaling factor applies, else the olympic score itself; '' for a
    setup whose profile is not mlperf (its number is no MLPerf score)."""
    if row.profile != MLPERF:
        return ""
    shown = text.duration(row.mlperf_score_ms.value)
    return shown + (f" (x{text.number(row.scaling_factor)})" if row.scaling_factor != 1.0 else "")


def decidable(row: SetupRow) -> bool:
    """Its numbers may decide (a significance star): neither a smoke run nor beside a disturbed host."""
    return row.attributable and not row.smoke


def setup_cell(row: SetupRow) -> str:
    """A setup's name as a table shows it: a smoke run's marked."""
    return f"{row.name} (smoke)" if row.profile == SMOKE else row.name


def host_cell(row: SetupRow) -> str:
    """'quiet', 'disturbed 2/9', 'not measured'."""
    evidence = row.host
    if evidence is None:
        return "-"
    total = evidence.quiet + evidence.disturbed + evidence.unknown
    if evidence.disturbed:
        return f"disturbed {evidence.disturbed}/{total}"
    return "not measured" if evidence.unknown else "quiet"


def main_cells(row: SetupRow, *, with_cost: bool, with_mlperf: bool = False) -> list[str]:
    """The time-to-train line of one setup."""
    cells = [
        setup_cell(row), host_cell(row), f"{row.converged}/{row.n}",
        text.with_interval(row.olympic_ms, text.duration),
        *((mlperf_score(row),) if with_mlperf else ()),
        "baseline" if row.speedup is None else text.with_interval(row.speedup, lambda v: text.number(v, "x")),
        per_epoch_cell(row), text.number(row.epochs_to_target.mean.value), text.energy(row.energy_j),
    ]
    if with_cost:
        cells.append(text.number(row.cost))
    return cells


def per_epoch_cell(row: SetupRow) -> str:
    """Per-epoch speed against the baseline with its interval (the hardware's number), '-' unknown."""
    ratio = row.seconds_per_epoch.ratio
    if row.speedup is None:
        return "baseline"
    return "-" if ratio is None else text.with_interval(ratio, lambda v: text.number(v, "x"))


MAIN_COLUMNS = ("setup", "host", "ok/n", "olympic TTT [95% CI]", "speedup [95% CI]", "per epoch [95% CI]",
                "epochs", "energy")
"""One estimator per column, its interval beside it: the p-values are the split table's, each on the
line of the quantity it tests."""
MLPERF_COLUMN = "MLPerf score (x RCP)"


def smoke_in(result: Comparison) -> bool:
    return any(row.smoke for row in result.rows)


def main_table(result: Comparison, with_cost: bool, width: int | None = None) -> Fitted:
    with_mlperf = scaled_anywhere(result)
    headers = (*MAIN_COLUMNS[:4], *((MLPERF_COLUMN,) if with_mlperf else ()), *MAIN_COLUMNS[4:],
               *(("cost",) if with_cost else ()))
    priority = {"setup": 0, "olympic TTT [95% CI]": 0, "speedup [95% CI]": 0, "host": 1, "ok/n": 1,
                "per epoch [95% CI]": 1, MLPERF_COLUMN: 2, "epochs": 4, "energy": 5, "cost": 3}
    columns = [Col(h, priority[h], cut=h == "setup") for h in headers]
    cells = [main_cells(row, with_cost=with_cost, with_mlperf=with_mlperf) for row in result.rows]
    return fit(columns, cells, width, title=caveat(f"time-to-train (baseline: {result.baseline})", smoke_in(result)))


def per_accelerator_table(result: Comparison, width: int | None = None) -> Fitted:
    """Each setup's speed per accelerator: accelerator-minutes per result and samples/s per accelerator."""
    columns = [Col("setup", cut=True), Col("hardware", 3, cut=True), Col("accelerators", 2),
               Col("accelerator-minutes", 1), Col("samples/s per accelerator", 1)]
    cells = []
    for row in result.rows:
        per = row.per_accelerator
        cells.append([setup_cell(row), row.hardware, "-" if per is None else str(per.accelerators),
                      text.number(per.accelerator_minutes if per else None),
                      text.number(per.samples_per_second if per else None)])
    return fit(columns, cells, width, title=caveat("per accelerator", smoke_in(result)))


SPLIT_QUANTITIES = (("time-to-train s", "time_to_train_s"), ("epochs-to-target", "epochs_to_target"),
                    ("s per epoch", "seconds_per_epoch"), ("samples per s", "samples_per_second"))


def split_table(result: Comparison, width: int | None = None) -> Fitted:
    columns = [Col("setup", cut=True), Col("quantity"), Col("mean [95% CI]"), Col("CV", 2),
               Col("vs baseline [95% CI]", 1), Col("Welch p", 1), Col("seeds needed", 3)]
    cells = []
    for row in result.rows:
        for name, attribute in SPLIT_QUANTITIES:
            quantity: Quantity = getattr(row, attribute)
            ratio = "-" if quantity.ratio is None else text.with_interval(quantity.ratio, lambda v: text.number(v, "x"))
            cells.append([setup_cell(row), name, text.with_interval(quantity.mean), text.percent(quantity.cv), ratio,
                          text.p_value(quantity.test, starred=decidable(row)), text.seeds_needed(quantity.test)])
    title = "time-to-train = epochs-to-target (convergence luck) x seconds per epoch (what differs)"
    return fit(columns, cells, width, title=caveat(title, smoke_in(result)))


WIDE_COLUMNS = 110
"""Below this terminal width each setup is shown as its own stacked table."""


def comparison_tables(result: Comparison, *, with_cost: bool, width: int | None,
                      per_accelerator: bool = False) -> list[Fitted]:
    """The comparison for a terminal ``width`` columns wide (None: --wide, every column): two wide
    tables, or one stacked table per setup (quantity, value) that stays readable at 80 columns; the
    per-accelerator table when asked."""
    extra = [per_accelerator_table(result, width)] if per_accelerator else []
    if width is None or width >= WIDE_COLUMNS:
        return [main_table(result, with_cost, width), split_table(result, width), *extra]
    return [setup_table(result, row, with_cost=with_cost, width=width) for row in result.rows] + extra


def setup_table(result: Comparison, row: SetupRow, *, with_cost: bool, width: int | None = None) -> Fitted:
    """One setup, stacked: a line per quantity, its value and how it compares with the baseline."""
    role = "baseline" if row.name == result.baseline else "vs " + result.baseline
    role = f"MLCommons published result, {role}" if row.published else role
    columns = [Col("quantity"), Col("value [95% CI]"), Col("vs baseline", 1), Col("Welch p", 2),
               Col("95% CI of vs baseline", 4), Col("seeds needed", 3)]
    speedup = "baseline" if row.speedup is None else text.number(row.speedup.value, "x")
    speedup_ci = "" if row.speedup is None else text.interval(row.speedup, lambda v: text.number(v, "x")).strip()
    cells = [
        ["host", host_cell(row), "", "", "", ""],
        ["converged/finished", f"{row.converged}/{row.n}", "", "", "", ""],
        ["olympic time-to-train", text.with_interval(row.olympic_ms, text.duration), speedup, "", speedup_ci, ""],
    ]
    if row.scaling_factor != 1.0 and mlperf_score(row):
        cells.append(["MLPerf score (x RCP)", mlperf_score(row), "", "", "", ""])
    for name, attribute in SPLIT_QUANTITIES:
        quantity: Quantity = getattr(row, attribute)
        ratio = "" if quantity.ratio is None else text.number(quantity.ratio.value, "x")
        ratio_ci = "" if quantity.ratio is None else text.interval(quantity.ratio, lambda v: text.number(v, "x"))
        cells.append([name, text.with_interval(quantity.mean), ratio,
                      text.p_value(quantity.test, starred=decidable(row)), ratio_ci.strip(),
                      text.seeds_needed(quantity.test)])
    cells.append(["energy-to-train", text.energy(row.energy_j), "", "", "", ""])
    if with_cost:
        cells.append(["cost-to-train", text.number(row.cost), "", "", "", ""])
    return fit(columns, cells, width, title=caveat(f"{row.name} ({role})", row.smoke))


def facts_table(setups: Sequence[Setup], width: int | None = None) -> tuple[Fitted | None, str]:
    """What differs between the setups (`insight.setup_facts`): a row per fact whose values differ,
    a column per setup; and a line naming the facts they share and those some setup does not know
    (an unknown is never 'the same'). None, and that line, when none differ."""
    differing, same, unknown = sorted_facts(setups)
    shared = "; ".join(facts_said(setups, same, unknown))
    if not differing:
        return None, "nothing known differs between the setups" + (f"; {shared}" if shared else "")
    columns = [Col("what differs"), *(Col(s.name, 1 + i, cut=True) for i, s in enumerate(setups))]
    cells = [[name, *(s.facts.get(name, UNKNOWN) for s in setups)] for name in differing]
    side_by_side = fit(columns, cells, width, title="what differs between the setups")
    if not side_by_side.left_out:
        return side_by_side, shared
    stacked = [[name if i == 0 else "", s.name, s.facts.get(name, UNKNOWN)]  # long names: a line per setup
               for name in differing for i, s in enumerate(setups)]
    return fit([Col("what differs"), Col("setup", 1, cut=True), Col("value")], stacked, width,
               title="what differs between the setups"), shared


def facts_said(setups: Sequence[Setup], same: Sequence[str], unknown: Sequence[str]) -> list[str]:
    """'the same in both: GPU count 8, ...', 'unknown for h100: driver': the facts shared, and those
    some setup does not know, by the setups that do not."""
    said = [f"the same in {'both' if len(setups) == 2 else 'all'}: "
            + ", ".join(f"{name} {setups[0].facts[name]}" for name in same)] if same else []
    by_who: dict[str, list[str]] = {}
    for name in unknown:
        missing = unknown_to(setups, name)
        who = "any setup" if len(missing) == len(setups) else ", ".join(missing)
        by_who.setdefault(who, []).append(name)
    said += [f"unknown for {who}: {', '.join(names)}" for who, names in by_who.items()]
    return said


RUNS_NAMED = 5
"""Run ids named per setup in the text output (a setup may pool thousands)."""


def runs_text(run_ids: tuple[str, ...]) -> str:
    """'runs a, b' or, for a setup of many, 'runs a, b, c, d, e and 4,995 more (5,000 runs)'."""
    if len(run_ids) <= RUNS_NAMED:
        return f"runs {', '.join(run_ids)}"
    return (f"runs {', '.join(run_ids[:RUNS_NAMED])} and {len(run_ids) - RUNS_NAMED:,} more"
            f" ({len(run_ids):,} runs)")
