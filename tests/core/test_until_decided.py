"""`mltrain run --until-decided --against` and `--seeds auto` end to end on the fake workload:
the run stops when its rule has decided, its manifest lists the seeds that ran, and every decision
is in decisions.json, `show` and `--json`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.insight.compare import per_seed_values
from orchestrator.insight.statistics import ALPHA
from orchestrator.results.decisions import QUANTITIES, DecisionLog, DecisionRule
from orchestrator.results.store import Store
from orchestrator.session.deciding import reference_setup
from tests.hardware.stored_runs import make_run

JITTER = {"FAKE_EPOCH_JITTER": "0.02"}
"""Each seed's epoch time 2% off its setup's, as published per-epoch times vary (1.7-2.6%)."""
REFERENCE_SEEDS = list(range(101, 107))
"""Other seeds than the new run's 1, 2, ...: the fake workload draws a seed's jitter from its number."""


def run_json(r) -> dict:
    assert r.code == 0, r.err
    return json.loads(r.out)


def verdicts(log: dict) -> set[str]:
    return {c["verdict"] for step in log["steps"] for c in step["comparisons"]}


def per_epoch(step: dict) -> dict:
    return next(c for c in step["comparisons"] if c["quantity"] == "seconds_per_epoch")


def test_a_setup_clearly_faster_per_epoch_stops_early_saying_faster(cli, tmp_path: Path, monkeypatch):
    results = tmp_path / "results"
    make_run(results, label="slow", seeds=REFERENCE_SEEDS, env=JITTER)
    monkeypatch.setenv("FAKE_EPOCH_JITTER", "0.02")
    monkeypatch.setenv("FAKE_EPOCH_MS", "900")  # 1.11x the reference's per-epoch speed

    r = cli("run", "fakebench", "--until-decided", "--against", "slow", "--label", "fast", "--max-seeds", "12",
            "--results", str(results), "--json")

    summary = run_json(r)
    log = summary["decisions"]
    last = log["steps"][-1]
    seeds = last["seeds"]
    assert last["outcome"] == "decided" and seeds < 12, last
    assert per_epoch(last)["verdict"] == "faster" and per_epoch(last)["low"] > 1
    assert per_epoch(last)["speed"] == pytest.approx(1000 / 900, rel=0.03)
    assert [s["seeds"] for s in log["steps"]] == list(range(1, seeds + 1))  # one decision after each seed
    assert all(s["outcome"] == "going_on" for s in log["steps"][:-1])
    assert f"decided after {seeds} seeds: faster (per-epoch speed)" in r.err
    assert "after 1 seed(s): " in r.err and ": another seed" in r.err
    # the result is still the profile's: every seed that ran, scored by its olympic rule
    assert summary["profile"] == "qualify" and summary["runs"] == seeds and summary["valid"]

    shown = run_json(cli("show", summary["run_id"], "--results", str(results), "--json"))
    assert shown["manifest"]["seeds"] == list(range(1, seeds + 1)) == log["rule"]["seed_order"][:seeds]
    assert shown["decisions"] == log
    assert log["rule"]["reference_run_ids"] and len(log["rule"]["reference"]["seconds_per_epoch"]) == 6
    text = cli("show", summary["run_id"], "--results", str(results))
    assert "seeds: until decided against slow" in text.out and "Wang & Ramdas" in text.out
    assert f"decided after {seeds} seeds: faster (per-epoch speed)" in text.out

    # resumed with nothing left to decide: nothing runs and the record stays as it was
    again = cli("run", "fakebench", "--resume", summary["run_id"], "--results", str(results), "--json")
    assert run_json(again)["decisions"] == log


def test_setups_alike_end_equivalent_within_the_margin_never_faster(cli, tmp_path: Path, monkeypatch):
    results = tmp_path / "results"
    make_run(results, label="base", seeds=REFERENCE_SEEDS, env=JITTER)
    monkeypatch.setenv("FAKE_EPOCH_JITTER", "0.02")

    r = cli("run", "fakebench", "--until-decided", "--against", "base", "--margin", "10", "--max-seeds", "10",
            "--results", str(results), "--json")

    log = run_json(r)["decisions"]
    assert not verdicts(log) & {"faster", "slower"}, verdicts(log)
    last = log["steps"][-1]
    assert last["outcome"] == "decided" and last["seeds"] < 10
    assert per_epoch(last)["verdict"] == "equivalent"
    assert 1 / 1.1 < per_epoch(last)["low"] < per_epoch(last)["high"] < 1.1
    assert f"decided after {last['seeds']} seeds: equivalent within the +-10.0% margin (per-epoch speed)" in r.err


def test_setups_alike_with_too_few_seeds_for_the_margin_end_undecided(cli, tmp_path: Path, monkeypatch):
    results = tmp_path / "results"
    make_run(results, label="base", seeds=REFERENCE_SEEDS, env=JITTER)
    monkeypatch.setenv("FAKE_EPOCH_JITTER", "0.02")

    r = cli("run", "fakebench", "--until-decided", "--against", "base", "--max-seeds", "4",
            "--results", str(results), "--json")

    log = run_json(r)["decisions"]
    assert not verdicts(log) & {"faster", "slower"}, verdicts(log)
    last = log["steps"][-1]
    assert last["outcome"] == "budget_spent" and last["seeds"] == 4 and per_epoch(last)["verdict"] == "undecided"
    interval = f"{per_epoch(last)['low']:.4g}x-{per_epoch(last)['high']:.4g}x"
    assert f"undecided after 4 seeds; the interval is {interval} (per-epoch speed)" in r.err


def test_seeds_auto_stops_when_the_mean_time_to_train_is_known_to_the_width(cli, tmp_path: Path, monkeypatch):
    monkeypatch.setenv("FAKE_BASE_EPOCHS", "200")  # 200-210 epochs: time-to-train varies ~2%
    monkeypatch.setenv("FAKE_MAX_EPOCHS", "300")
    monkeypatch.setenv("FAKE_SLEEP_S", "0")

    r = cli("run", "fakebench", "--seeds", "auto", "--width", "5", "--results", str(tmp_path), "--json")

    summary = run_json(r)
    last = summary["decisions"]["steps"][-1]
    assert last["outcome"] == "decided" and 4 <= last["seeds"] < 20
    assert last["mean"]["relative_half_width"] <= 0.05
    assert last["mean"]["low_ms"] < summary["time_to_train_ms"]["mean"] < last["mean"]["high_ms"]
    assert summary["runs"] == last["seeds"] and summary["valid"]  # scored by the olympic rule as ever
    assert f"decided after {last['seeds']} seeds: the mean time-to-train is" in r.err


def test_a_resumed_run_goes_on_under_its_own_rule_with_the_next_seed(cli, tmp_path: Path, monkeypatch):
    """A run stopped after two seeds (made here in-process) takes seed 3, 4, ... on --resume, until
    decided, and appends to its decisions."""
    results = tmp_path / "results"
    make_run(results, label="slow", seeds=REFERENCE_SEEDS, env=JITTER)
    fast = {**JITTER, "FAKE_EPOCH_MS": "900"}
    run_id = make_run(results, label="fast", seeds=[1, 2], env=fast)
    store = Store(results)
    setup = reference_setup(store, "slow", "fakebench")
    rule = DecisionRule(
        mode="until_decided", method="test", alpha=ALPHA, max_seeds=12, least_seeds=4, seed_order=tuple(range(1, 13)),
        margin=0.03, against="slow", reference_run_ids=setup.run_ids,
        reference={q: tuple(per_seed_values(setup, q)) for q in QUANTITIES},
    )
    stopped = store.open(run_id).locked()
    stopped.save_decisions(DecisionLog(rule=rule))
    stopped.save_manifest(stopped.manifest.model_copy(update={"data_dir": str(tmp_path / "data")}))
    stopped.close()
    for key, value in fast.items():
        monkeypatch.setenv(key, value)

    summary = run_json(cli("run", "fakebench", "--resume", run_id, "--results", str(results), "--json"))

    steps = summary["decisions"]["steps"]
    assert steps[0]["seeds"] == 2 and steps[-1]["outcome"] == "decided" and per_epoch(steps[-1])["verdict"] == "faster"
    assert Store(results).open(run_id).manifest.seeds == tuple(range(1, steps[-1]["seeds"] + 1))
