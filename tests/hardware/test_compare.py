"""Comparison statistics, on constructed setups with known answers and on published MLPerf runs."""

from __future__ import annotations

import csv
import io
import math
import os
import statistics
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from orchestrator.insight.compare import (
    SeedResult,
    Setup,
    compare,
    olympic_energy,
    olympic_interval,
    quantity,
)
from orchestrator.insight.statistics import (
    MAX_SEEDS_NEEDED,
    cv,
    mean_interval,
    ratio_interval,
    seeds_needed,
    welch,
)
from orchestrator.mlperf.scoring import olympic_mean
from orchestrator.render.comparison import flat_row
from orchestrator.render.verdicts import verdict

PUBLISHED = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "mlperf_published" / "mlperf_runs.csv"
"""The data set given beside the checkout (../shared), as CI has it."""


def make_setup(name: str, epochs: list[float], seconds_per_epoch: list[float], *, failed: int = 0,
               drop: int = 1, energy: list[float] | None = None, facts: dict[str, str] | None = None,
               disturbed: tuple[int, ...] = (), profile: str = "qualify") -> Setup:
    """A setup of quiet seeds (those at the indices in ``disturbed`` ran beside other work)."""
    def host(i: int) -> dict:
        if i in disturbed:
            return {"host": "disturbed", "host_reason": "disturbed: the host ran other work in 80% of the seed's time"}
        return {"host": "quiet", "host_reason": "quiet: other processes 1% of the host's CPU"}

    seeds = [
        SeedResult(seed=i, converged=True, time_to_train_ms=e * s * 1000, epochs_to_target=e, samples_per_epoch=168,
                   energy_j=energy[i] if energy else None, **host(i))
        for i, (e, s) in enumerate(zip(epochs, seconds_per_epoch, strict=True))
    ]
    seeds += [SeedResult(seed=100 + i, converged=False, time_to_train_ms=None, **host(100 + i))
              for i in range(failed)]
    return Setup(name=name, seeds=tuple(seeds), drop_per_end=drop, max_non_converged=drop, facts=facts or {},
                 run_ids=(f"run-{name}",), profile=profile)


GPU_FACTS = {"GPU": "NVIDIA A100-SXM4-80GB", "GPU count": "1", "image": "sha256:0123456789ab", "runner": "docker"}


def test_olympic_score_matches_the_scoring_module() -> None:
    setup = make_setup("a", [20, 25, 30, 22, 40, 27, 31], [1.0] * 7, failed=1)
    interval = olympic_interval(setup)
    times = [s.time_to_train_ms for s in setup.seeds if s.converged]
    assert interval.value == olympic_mean(times, 1, 1)
    assert interval.low < interval.value < interval.high


def test_too_many_failures_give_no_score() -> None:
    setup = make_setup("a", [20, 25, 30], [1.0] * 3, failed=2)
    row = compare([setup]).rows[0]
    assert row.olympic_ms.value is None and not row.valid and row.notes


def test_hardware_difference_is_found_and_convergence_luck_is_not() -> None:
    rng = np.random.default_rng(7)
    epochs_a, epochs_b = rng.normal(2000, 540, 20).clip(800), rng.normal(2000, 540, 20).clip(800)
    speed_a, speed_b = rng.normal(0.50, 0.013, 20), rng.normal(0.40, 0.010, 20)  # b: 25% faster epochs
    a = make_setup("a100", list(epochs_a), list(speed_a), facts=GPU_FACTS)
    b = make_setup("h100", list(epochs_b), list(speed_b), facts={**GPU_FACTS, "GPU": "NVIDIA H100 80GB HBM3"})
    result = compare([a, b], baseline="a100")
    base, row = result.rows
    assert base.speedup is None and base.ttt_test is None and base.seconds_per_epoch.ratio is None
    assert row.seconds_per_epoch.test.significant
    assert row.seconds_per_epoch.ratio.value == pytest.approx(np.mean(speed_a) / np.mean(speed_b))
    assert row.seconds_per_epoch.ratio.low < 1.25 < row.seconds_per_epoch.ratio.high
    assert row.seconds_per_epoch.test.seeds_needed <= 4
    assert row.samples_per_second.ratio.value == pytest.approx(
        np.mean(168 / speed_b) / np.mean(168 / speed_a))
    assert row.epochs_to_target.test.seeds_needed > 20  # noise needs many more seeds
    assert row.speedup.low < row.speedup.value < row.speedup.high
    line = verdict(row, result)
    assert line.startswith("h100 is ") and " faster per epoch than a100 [" in line and "(hardware)" in line
    assert "per epoch" in line.split(";")[0] and "not decided" not in line.split(";")[0]  # the hardware first


def test_welch_matches_scipy_and_a_textbook_sample_size() -> None:
    a, b = [10.0, 11.0, 9.5, 10.5, 10.2], [11.0, 12.5, 11.8, 12.0, 11.1]
    test = welch(a, b)
    assert test.p_value == pytest.approx(stats.ttest_ind(b, a, equal_var=False).pvalue)
    # Two-sided alpha 0.05, power 0.8, effect size d = 1: 17 per group (Cohen's tables).
    assert seeds_needed(1.0, 1.0, 1.0) == 17
    # d = 0.5: 64 per group.
    assert seeds_needed(0.5, 1.0, 1.0) == 64
    assert seeds_needed(0.0, 1.0, 1.0) is None
    assert seeds_needed(1e-9, 1.0, 1.0) == MAX_SEEDS_NEEDED
    assert welch([1.0], [2.0, 3.0]).p_value is None


def test_intervals() -> None:
    values = [1.0, 2.0, 3.0, 4.0]
    interval = mean_interval(values)
    half = stats.t.ppf(0.975, 3) * statistics.stdev(values) / 2
    assert (interval.low, interval.high) == pytest.approx((2.5 - half, 2.5 + half))
    assert cv(values) == pytest.approx(statistics.stdev(values) / 2.5)
    same = ratio_interval([2.0, 2.0], [1.0, 1.0], higher_is_better=False)
    assert (same.value, same.low, same.high) == (2.0, 2.0, 2.0)


def test_energy_follows_the_olympic_selection_and_cost() -> None:
    setup = make_setup("a", [10, 20, 30, 40], [1.0] * 4, energy=[100.0, 200.0, 300.0, 400.0])
    assert olympic_energy(setup) == 250.0  # the fastest and slowest are dropped
    partial = make_setup("b", [10, 20, 30, 40], [1.0] * 4, energy=[100.0, None, 300.0, 400.0])
    assert olympic_energy(partial) is None
    row = compare([setup], cost_per_hour={"a": 3.6}).rows[0]
    assert row.energy_j == 250.0
    assert row.cost == pytest.approx(3.6 * 25.0 / 3600)  # olympic 25 s at 3.6 per hour


def test_flat_row_has_every_csv_column() -> None:
    from orchestrator.render.comparison import CSV_COLUMNS

    a = make_setup("a", [10, 12, 11, 13], [1.0, 1.1, 1.0, 1.05])
    b = make_setup("b", [10, 11, 12, 13], [0.5, 0.52, 0.51, 0.5])
    rows = [flat_row(r) for r in compare([a, b]).rows]
    assert all(list(r) == list(CSV_COLUMNS) for r in rows)
    assert rows[1]["speedup"] > 1.5


def test_bad_input() -> None:
    a = make_setup("a", [1, 2], [1, 1])
    with pytest.raises(ValueError, match="baseline"):
        compare([a], baseline="zzz")
    with pytest.raises(ValueError, match="differ"):
        compare([a, a])
    with pytest.raises(ValueError):
        SeedResult(seed=1, converged=True, time_to_train_ms=None)


def published_setups() -> list[Setup]:
    groups: dict[tuple[str, str, str], list[dict[str, str]]] = {}
    with PUBLISHED.open() as handle:
        for row in csv.DictReader(handle):
            if row["benchmark"] == "unet3d":
                groups.setdefault((row["round"], row["submitter"], row["system"]), []).append(row)
    setups = []
    for (round_, submitter, system), rows in groups.items():
        if len(rows) != 40:
            continue
        seeds = []
        for i, row in enumerate(rows):
            epoch = float(row["last_epoch"])
            epoch = epoch / 168 if epoch > 20000 else epoch  # samples-based logs (see the data README)
            converged = row["converged"] == "True"
            minutes = float(row["minutes"]) if row["minutes"] else None
            seeds.append(SeedResult(seed=i, converged=converged, time_to_train_ms=minutes * 60000 if minutes else None,
                                    epochs_to_target=epoch if converged else None, samples_per_epoch=168))
        setups.append(Setup(name=f"{round_}/{submitter}/{system}", seeds=tuple(seeds), drop_per_end=4,
                            max_non_converged=4))
    return setups


@pytest.mark.skipif(not PUBLISHED.exists(), reason="published MLPerf data not available")
def test_published_unet3d_variation_facts() -> None:
    """The issue quotes median CVs over unet3d systems: time-to-train ~30%, epochs ~27%, per epoch ~2.6%."""
    setups = published_setups()
    assert len(setups) >= 140
    ttt = statistics.median(quantity(s, None, "time_to_train_s", higher_is_better=False).cv for s in setups)
    epochs = statistics.median(quantity(s, None, "epochs_to_target", higher_is_better=False).cv for s in setups)
    per_epoch = statistics.median(quantity(s, None, "seconds_per_epoch", higher_is_better=False).cv for s in setups)
    assert ttt == pytest.approx(0.30, abs=0.01)
    assert epochs == pytest.approx(0.27, abs=0.01)
    assert per_epoch == pytest.approx(0.026, abs=0.002)


@pytest.mark.skipif(not PUBLISHED.exists(), reason="published MLPerf data not available")
def test_published_systems_compared() -> None:
    """Two published 8xH100 systems of round 4.0: their olympic scores match the published ones
    and the comparison cannot tell them apart on time-to-train (convergence noise)."""
    by_name = {s.name: s for s in published_setups()}
    a = by_name["4.0/Lenovo/SR685aV3-8xH100_SXM5_80GB_700W"]
    b = by_name["4.0/Supermicro/SYS-421GE-TNHR2-LCC-1"]
    result = compare([a, b])
    published = {}
    with Path(PUBLISHED.parent / "mlperf_published_extended.csv").open() as handle:
        for row in csv.DictReader(handle):
            if row["olympic_unscaled"]:  # before the RCP scaling factor the review applied
                published[(row["round"], row["system"], row["benchmark"])] = float(row["olympic_unscaled"])
    for row, system in zip(result.rows, ("SR685aV3-8xH100_SXM5_80GB_700W", "SYS-421GE-TNHR2-LCC-1"), strict=True):
        assert row.olympic_ms.value / 60000 == pytest.approx(published[("v4.0", system, "unet3d")], abs=0.001)
    row = result.rows[1]
    # about 0.2 standard deviations apart: ~16/d^2 = ~390 seeds per setup would be needed
    assert not row.ttt_test.significant and 300 < row.ttt_test.seeds_needed < 500
    assert row.speedup.low < 1 < row.speedup.high
    assert math.isclose(row.seconds_per_epoch.ratio.value, 1.0, abs_tol=0.02)


def test_seeds_needed_text_shows_the_search_ceiling_as_a_bound():
    from orchestrator.insight.statistics import Test
    from orchestrator.text import number as number_text
    from orchestrator.text import seeds_needed as seeds_needed_text

    assert seeds_needed_text(None) == "-"
    assert seeds_needed_text(Test(p_value=0.3, significant=False, seeds_needed=None)) == "-"
    assert seeds_needed_text(Test(p_value=0.3, significant=False, seeds_needed=1234)) == "1,234"
    capped = Test(p_value=0.9, significant=False, seeds_needed=MAX_SEEDS_NEEDED)
    assert seeds_needed_text(capped) == f">={MAX_SEEDS_NEEDED:,}"
    assert number_text(None) == "-" and number_text(1.23456, "x") == "1.235x"
    assert number_text(11_314.6, " samples/s") == "11,310 samples/s" and number_text(-123_456.0) == "-123,500"
    assert number_text(9_999.4) == "9999" and number_text(float("inf")) == "inf"


def test_csv_cells_that_a_spreadsheet_would_run_as_formulas_are_quoted() -> None:
    from orchestrator.render.comparison import csv_text

    hostile = make_setup('=HYPERLINK("http://x","click")', [10, 12, 11, 13], [1.0, 1.1, 1.0, 1.05])
    others = [make_setup(name, [10, 11, 12, 13], [0.5, 0.52, 0.51, 0.5]) for name in ("@SUM(A1)", "-2+3", "plain")]
    rows = list(csv.DictReader(io.StringIO(csv_text(compare([hostile, *others])))))
    assert [r["setup"] for r in rows] == ["'=HYPERLINK(\"http://x\",\"click\")", "'@SUM(A1)", "'-2+3", "plain"]
    assert all(not cell.startswith(("=", "+", "@")) for r in rows for cell in r.values())
    assert float(rows[1]["speedup"]) > 1.5  # numbers stay numbers


def test_setups_from_the_index_equal_setups_from_the_run_folders(tmp_path: Path) -> None:
    """compare reads a store of thousands of runs from its index; the setups must be the ones the
    run folders make (`to_setups(load_runs(...))`): every seed, status, time and rule."""
    from orchestrator.insight.runs import chosen_runs, load_runs, load_setups, to_setups
    from orchestrator.results.store import Store
    from tests.hardware.stored_runs import make_run

    results = tmp_path / "results"
    for label, seeds in (("a", [1, 2, 3, 4]), ("a", [5, 6, 7]), ("b", [1, 2, 3])):
        make_run(results, label=label, seeds=seeds, env={"FAKE_MODE": "no_converge", "FAKE_MODE_SEEDS": "2"})
    make_run(results, label="c", seeds=[1, 2, 3], power_w=300.0)  # telemetry: its energy is read from the series
    store = Store(results)
    chosen, listing = chosen_runs(store, [], ["a", "b", "c"])
    indexed = load_setups(store, chosen, listing)
    assert indexed == to_setups(load_runs(store, [], ["a", "b", "c"]))
    assert sum(not seed.converged for seed in indexed[0].seeds) == 1  # seed 2 of its first run
    assert all(seed.energy_j for seed in indexed[2].seeds)


# ---------------------------------------------------------------- the evidence before the numbers (issue 27)


def _two(*, disturbed: tuple[int, ...] = (), facts_b: dict[str, str] | None = None, profile: str = "qualify",
         profile_b: str | None = None):
    rng = np.random.default_rng(3)
    a = make_setup("cpu-b", list(rng.normal(20, 1, 9)), [1.0] * 9, facts=GPU_FACTS, profile=profile)
    b = make_setup("docker", list(rng.normal(20, 1, 9)), [1.75] * 9, facts=facts_b or GPU_FACTS,
                   disturbed=disturbed, profile=profile_b or profile)
    return compare([a, b], baseline="cpu-b")


def test_a_difference_beside_a_disturbed_seed_is_not_attributable_and_says_why() -> None:
    result = _two(disturbed=(2, 5))
    row = result.rows[1]
    assert not row.attributable and row.host.disturbed == 2 and row.ttt_test.significant
    line = verdict(row, result)
    assert line.startswith("docker vs cpu-b: not attributable to the setups: docker ran on a disturbed host in 2 of 9"
                           " seeds (the host ran other work in 80% of the seed's time")
    assert line.count("disturbed host") == 1  # one sentence per disturbed side, the detail in `show`
    assert "details: mltrain show run-docker" in line
    assert "docker is 1.75x slower per epoch than cpu-b [" in line  # the numbers are still shown, undecided
    assert "not decided" not in line


def test_where_both_sides_are_quiet_the_statistics_stand() -> None:
    result = _two()
    row = result.rows[1]
    assert row.attributable and row.host.verdict == "quiet"
    line = verdict(row, result)
    assert line.startswith("docker is 1.75x slower per epoch than cpu-b [") and "not attributable" not in line
    assert "; time-to-train " in line


def test_the_verdict_decides_by_the_interval_of_the_same_quantity() -> None:
    """'h200 is 1.06x faster per epoch [1.05, 1.07]; time-to-train 1.05x [0.94, 1.16], not decided': each
    clause's decision is its own interval's (1 inside: not decided), never another estimator's p."""
    rng = np.random.default_rng(11)
    a = make_setup("h100", list(rng.normal(2000, 500, 9)), [1.06] * 9, facts=GPU_FACTS)
    b = make_setup("h200", list(rng.normal(2000, 500, 9)), [1.0] * 9,
                   facts={**GPU_FACTS, "GPU": "NVIDIA H200"})
    result = compare([a, b], baseline="h100")
    row = result.rows[1]
    line = verdict(row, result)
    speed = row.seconds_per_epoch.ratio
    assert line.startswith(f"h200 is {speed.value:.3g}x faster per epoch than h100 [") and "(hardware)" in line
    first, second = line.split("; ")[:2]
    assert "not decided" not in first
    assert row.speedup.low < 1 < row.speedup.high
    assert second.startswith(f"time-to-train {row.speedup.value:.3g}x [{row.speedup.low:.3g},")
    assert second.endswith("not decided") and "p=" not in second


def test_a_smoke_comparison_never_reads_as_a_result() -> None:
    result = _two(profile="smoke")
    row = result.rows[1]
    line = verdict(row, result)
    assert line.startswith("[smoke: proves the pipeline, comparable with nothing] docker is")
    assert "decided" not in line
    from orchestrator.render.comparison import comparison_tables

    for fitted in comparison_tables(result, with_cost=False, width=None):  # no significance stars either
        rendered = " ".join(" ".join(str(c) for c in column.cells) for column in fitted.table.columns)
        assert "*" not in rendered


def test_across_profiles_the_reason_named_is_the_profile() -> None:
    result = _two(profile="qualify", profile_b="smoke", disturbed=(2,))
    line = verdict(result.rows[1], result)
    assert "not comparable: docker was made with the smoke profile, cpu-b with the qualify profile" in line
    assert "disturbed" not in line and "decided" not in line


def test_hardware_is_named_only_where_the_hardware_differs() -> None:
    def said(result) -> str:
        return verdict(result.rows[1], result)

    software = _two(facts_b={**GPU_FACTS, "runner": "local", "image": "none (local)"})
    assert software.rows[1].differs == ("image", "runner")
    assert "per epoch than cpu-b [" in said(software) and "(image, runner)" in said(software)
    assert "hardware" not in said(software)
    both = _two(facts_b={**GPU_FACTS, "GPU": "NVIDIA H100 80GB HBM3", "runner": "local"})
    assert "(hardware, runner)" in said(both)
    assert "(nothing known differs)" in said(_two())


def test_a_two_seed_interval_never_goes_below_zero() -> None:
    """Two seeds far apart: Student's t of 1 degree of freedom is 12.7; the interval of a time is
    floored at 0, never '95% CI -129.2-194.5 s'."""
    from orchestrator.mlperf.scoring import spread

    two = spread([20_000.0, 45_300.0])
    assert two.ci95_low == 0.0 and two.ci95_high > 45_300.0
    interval = mean_interval([20.0, 45.3])
    assert interval.low == 0.0 and interval.high > 45.3


def test_the_mlperf_score_column_is_empty_for_other_profiles() -> None:
    from orchestrator.render.comparison import mlperf_score

    assert mlperf_score(_two().rows[0]) == ""
    assert mlperf_score(_two(profile="mlperf").rows[0]).endswith(" s")


def test_each_interval_sits_beside_the_test_of_its_own_quantity() -> None:
    """The olympic speedup's interval is a bootstrap of the olympic score; the Welch p tests mean times:
    they are never on one line (the p is on the line of the mean it tests)."""
    from orchestrator.render.comparison import main_table, setup_table

    result = _two()
    stacked = setup_table(result, result.rows[1], with_cost=False)
    cells = {column.header: [str(cell) for cell in column.cells] for column in stacked.table.columns}
    olympic = cells["quantity"].index("olympic time-to-train")
    assert str(cells["Welch p"][olympic]) == "" and str(cells["95% CI of vs baseline"][olympic]).startswith("[")
    mean = cells["quantity"].index("time-to-train s")
    assert str(cells["Welch p"][mean]) not in ("", "-")
    headers = [column.header for column in main_table(result, False).table.columns]
    assert "Welch p" not in headers and "per epoch [95% CI]" in headers


def test_too_few_seeds_for_an_olympic_score_still_lead_with_the_hardware() -> None:
    """Two seeds each: no olympic score (one dropped per end), but per-epoch speed is measured and said
    first; its interval of two seeds says it is not decided, never a negative bound."""
    a = make_setup("a", [25.0, 27.0], [1.0, 1.02])
    b = make_setup("b", [25.0, 27.0], [0.9, 0.93])
    result = compare([a, b], baseline="a")
    line = verdict(result.rows[1], result)
    assert line.startswith("b is ") and " faster per epoch than a [" in line
    assert "no olympic time-to-train to compare (too few converged runs for its rule)" in line
    assert "[-" not in line and ", -" not in line


def test_a_setup_of_thousands_of_runs_gets_the_normal_interval_which_agrees_with_the_bootstrap(monkeypatch) -> None:
    """Above LARGE_SAMPLE runs the bootstrap (seconds per interval: 20 s a comparison of 2 x 5,000
    runs) gives way to the normal approximation of the olympic mean, which agrees with it."""
    from orchestrator.mlperf.scoring import olympic_mean_along

    rng = np.random.default_rng(7)
    base = make_setup("base", list(rng.normal(30, 3, 5000)), [60.0] * 5000, failed=1)
    fast = make_setup("fast", list(rng.normal(28, 3, 5000)), [60.0] * 5000)
    truth = {}
    for setup in (base, fast):
        times = np.array([s.time_to_train_ms for s in setup.converged()])
        failures = len(setup.seeds) - len(times)
        boot = stats.bootstrap((times,), lambda x, axis, f=failures: olympic_mean_along(x, f, 1, axis),
                               vectorized=True, method="percentile", n_resamples=999,
                               rng=np.random.default_rng(1))
        truth[setup.name] = boot.confidence_interval

    def refused(*args, **kwargs):
        raise AssertionError("a bootstrap of thousands of runs")

    monkeypatch.setattr(stats, "bootstrap", refused)  # scipy.stats, as bootstrap.py imports it where it bootstraps
    for setup in (base, fast):
        interval = olympic_interval(setup)
        width = truth[setup.name].high - truth[setup.name].low
        assert interval.low == pytest.approx(truth[setup.name].low, abs=0.1 * width)
        assert interval.high == pytest.approx(truth[setup.name].high, abs=0.1 * width)
    row = next(r for r in compare([base, fast]).rows if r.name == "fast")
    assert row.speedup.low < row.speedup.value < row.speedup.high
    assert row.speedup.value == pytest.approx(olympic_interval(base).value / olympic_interval(fast).value)


def test_compare_reads_runs_with_telemetry_from_the_index_without_opening_them(tmp_path: Path, monkeypatch) -> None:
    """A run's records keep each seed's host verdict and energy, so a comparison of thousands of runs
    with telemetry (every real run has it) opens none of them: it opened all 7,000, 22 s."""
    from orchestrator.insight.runs import chosen_runs, load_runs, load_setups, to_setups
    from orchestrator.results.store import Store
    from tests.hardware.stored_runs import make_run

    results = tmp_path / "results"
    for label, power in (("a", 300.0), ("a", 310.0), ("b", 250.0)):
        make_run(results, label=label, seeds=[1, 2, 3], power_w=power, other_cpu_pct=1.0)
    store = Store(results)
    from_folders = to_setups(load_runs(store, [], ["a", "b"]))
    chosen, listing = chosen_runs(store, [], ["a", "b"])
    first = {setup: runs[0] for setup, runs in (("a", chosen[:2]), ("b", chosen[2:]))}

    def opened(self, run_id):
        raise AssertionError(f"run {run_id} opened")

    monkeypatch.setattr(Store, "open", opened)
    monkeypatch.setattr(Store, "manifest", lambda self, run_id, real=Store.manifest: real(self, run_id)
                        if run_id in first.values() else opened(self, run_id))
    indexed = load_setups(store, chosen, listing)
    assert indexed == from_folders
    assert all(seed.energy_j and seed.host == "quiet" for setup in indexed for seed in setup.seeds)


def test_the_compare_command_opens_no_run_of_one_node_runs(hw_cli, tmp_path: Path, monkeypatch) -> None:
    """The command as a whole, scaling's look at node counts included, compares one-node runs from the
    index alone: scaling opened every chosen run to learn it ran on one node."""
    from orchestrator.results.store import Store
    from tests.hardware.stored_runs import make_run

    results = tmp_path / "results"
    for label, power in (("a", 300.0), ("a", 310.0), ("b", 250.0)):
        make_run(results, label=label, seeds=[1, 2, 3], power_w=power, other_cpu_pct=1.0)
    assert hw_cli("list", "--results", str(results)).code == 0  # the index, made before the count starts
    opened: list[str] = []
    real_open, real_manifest = Store.open, Store.manifest
    monkeypatch.setattr(Store, "open", lambda self, run_id: opened.append(run_id) or real_open(self, run_id))
    monkeypatch.setattr(Store, "manifest", lambda self, run_id: opened.append(run_id) or real_manifest(self, run_id))
    r = hw_cli("compare", "--label", "a", "--label", "b", "--results", str(results))
    assert r.code == 0, r.err
    assert len(opened) <= 2 and "scaling" not in r.out  # one manifest a setup (its facts), no run opened


def test_compare_imports_neither_matplotlib_nor_scipy_stats(tmp_path: Path) -> None:
    """Their imports alone (1 to 2 s for scipy.stats, 0.6 s for matplotlib) cost more CPU than the rest of
    a comparison of 10,000 runs: compare imports neither, whether its intervals are bootstrapped (a few
    runs: `orchestrator.percentile_bootstrap`) or not (above LARGE_SAMPLE runs). (MLCommons' RCP checker,
    asked for the reference of a batch size, imports scipy.stats itself: here it is asked for none.)"""
    import json
    import subprocess
    import sys

    from tests.hardware.stored_runs import make_run

    results = tmp_path / "results"
    for label in ("a", "b"):
        make_run(results, label=label, seeds=[1, 2, 3, 4, 5], power_w=300.0)  # 3 kept: an interval
    code = ("import sys\nfrom orchestrator.insight import bootstrap\n"
            "bootstrap.LARGE_SAMPLE = {large}  # 1: no interval bootstrapped, as above 2,000 runs\n"
            "from orchestrator.mlperf import checkers\ncheckers.rcp_point = lambda *args: None\n"
            "from orchestrator.cli import main\n"
            "code = main(['compare', '--label', 'a', '--label', 'b', '--json'])\n"
            "import json\nprint(json.dumps({{'code': code, 'imported': [m for m in ('matplotlib', 'scipy.stats',"
            " 'scipy.integrate') if m in sys.modules]}}), file=sys.stderr)\n")

    def imported(large: int) -> dict:
        done = subprocess.run([sys.executable, "-c", code.format(large=large)], capture_output=True, text=True,
                              env={**os.environ, "MLTRAIN_RESULTS": str(results)}, check=True)
        assert json.loads(done.stdout)["rows"], done.stdout
        return json.loads(done.stderr.strip().splitlines()[-1])

    assert imported(1) == {"code": 0, "imported": []}
    assert imported(2000) == {"code": 0, "imported": []}  # a few runs: bootstrapped


def test_a_setup_s_values_are_each_seed_s_made_once_and_read_only() -> None:
    """`Setup.values` is each converged seed's quantity, in seed order, as `SeedResult` says it; the
    array is kept for every later statistic, so no caller may change it."""
    setup = make_setup("a", [10.0, 12.0, 11.0], [2.0, 2.5, 3.0], failed=1)
    converged = [s for s in setup.seeds if s.converged]
    for name in ("time_to_train_s", "epochs_to_target", "seconds_per_epoch", "samples_per_second"):
        values = setup.values(name)
        expected = [s.time_to_train_ms / 1000 for s in converged] if name == "time_to_train_s" else [
            getattr(s, name) for s in converged]
        assert values.tolist() == expected and values.dtype == np.float64
        assert setup.values(name) is values
        with pytest.raises(ValueError, match="read-only"):
            values[0] = 0.0
    assert make_setup("none", [], [], failed=2).values("time_to_train_s").size == 0
