"""A third workload, declared only in its own folder (tests/workloads/lossbench/) and its profiles
(tests/workloads/seeds.yaml), runs, scores and compares through `mltrain` with nothing in
orchestrator/ naming it: a llama2_70b_lora double of training 4.1.0 whose metric is an evaluation
loss (lower is better), counted in samples, with an epoch of its own (3901 samples)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.mlperf.mllog import build_record, parse_lines
from orchestrator.mlperf.quality import Goal
from orchestrator.results.records import RunStatus
from orchestrator.results.store import Store

LOSSBENCH = Path(__file__).resolve().parents[1] / "workloads" / "lossbench"
TRAIN_SAMPLES, EVAL_EVERY = 3901, 384
NEEDED = {s: 8 + (5 * s) % 3 for s in range(1, 6)}
"""Evaluations seed s needs to bring the loss down to the target (loss_train.py)."""
LOSS = Goal(target=0.925, better="lower")


def olympic_ms(seeds, eval_ms: int = 1000) -> float:
    times = sorted(NEEDED[s] * eval_ms for s in seeds)[1:-1]
    return sum(times) / len(times)


def test_it_runs_scores_and_compares_by_its_own_declaration(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    results = str(tmp_path / "results")
    first = cli("run", "lossbench", "--label", "a", "--results", results, "--json")
    assert first.code == 0, first.err
    summary = json.loads(first.out)
    assert summary["valid"] and summary["converged"] == 5 and summary["score_ms"] == pytest.approx(olympic_ms(NEEDED))
    store = Store(Path(results))
    run = store.open(store.run_ids()[0])
    assert run.manifest.benchmark == "llama2_70b_lora" and run.manifest.ruleset == "4.1.0"  # its declaration
    for seed, record in run.records.items():
        assert record.status is RunStatus.CONVERGED, record.reason
        assert record.epochs_to_target == round(NEEDED[seed] * EVAL_EVERY / TRAIN_SAMPLES, 4)  # the first loss <= 0.925
        assert record.best_accuracy == 0.925  # the lowest loss
        assert record.compliance.ruleset == "4.1.0" and record.compliance.valid and not record.compliance.relaxed

    monkeypatch.setenv("FAKE_EVAL_MS", "800")  # the same convergence, 1.25x the speed
    second = cli("run", "lossbench", "--label", "b", "--results", results, "--json")
    assert second.code == 0, second.err
    compared = cli("compare", "--label", "a", "--label", "b", "--results", results, "--json")
    assert compared.code == 0, compared.err
    a, b = json.loads(compared.out)["rows"]
    assert b["speedup"]["value"] == pytest.approx(1.25, rel=1e-3)
    assert b["epochs_to_target"]["ratio"]["value"] == pytest.approx(1.0)
    assert a["samples_per_second"]["mean"]["value"] == pytest.approx(EVAL_EVERY, rel=1e-4)  # its own epoch, 1 s an eval


def test_its_mlperf_profile_follows_the_benchmarks_rule_and_agrees_with_mlcommons(cli, tmp_path: Path):
    r = cli("run", "lossbench", "--profile", "mlperf", "--results", str(tmp_path), "--json")
    assert r.code == 0, r.err
    summary = json.loads(r.out)
    assert summary["runs"] == 10 and summary["rule"] == {"drop_per_end": 1, "max_non_converged": 1, "runs_required": 10}
    mlcommons = summary["mlcommons"]
    assert mlcommons["ruleset"] == "4.1.0" and mlcommons["agrees"], mlcommons
    assert mlcommons["summarizer_score_min"] * 60_000 == pytest.approx(summary["scaled_score_ms"])
    assert mlcommons["package"]["passed"], mlcommons["package"]


def test_a_looser_profile_target_is_a_higher_loss_and_relaxes_the_lower_is_better_rule(cli, tmp_path: Path):
    r = cli("run", "lossbench", "--profile", "smoke", "--results", str(tmp_path), "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["converged"] == 3
    store = Store(tmp_path)
    record = store.open(store.run_ids()[0]).records[1]
    assert record.target == 1.0 and record.compliance.valid
    assert record.compliance.relaxed == ("quality target: the rule `(v['value'] <= 0.925) and v['value'] > 0.0` is"
                                         " not applied; the smoke profile's target is 1",)


def fixture_log(seed: int, **env: str) -> list[str]:
    ran = subprocess.run([sys.executable, str(LOSSBENCH / "loss_train.py"), str(seed)], capture_output=True,
                         text=True, env={**os.environ, **env}, check=True, timeout=60)
    return ran.stdout.splitlines()


def test_a_loss_above_the_target_does_not_converge_and_a_nan_loss_diverges():
    stuck = build_record(parse_lines(fixture_log(2, FAKE_MODE="no_converge", FAKE_SLEEP_S="0")), goal=LOSS)
    assert stuck.status is RunStatus.NOT_CONVERGED and stuck.epochs_to_target is None
    assert stuck.reason == "run_stop aborted; best eval_accuracy 1.018 > 0.925"  # the lowest loss, and it is above
    diverged = build_record(parse_lines(fixture_log(2, FAKE_MODE="diverge", FAKE_SLEEP_S="0")), goal=LOSS)
    assert diverged.status is RunStatus.DIVERGED and diverged.reason.startswith("eval_accuracy collapsed to nan")
    # read as if higher were better, the first loss (1.43) would already "reach" 0.925
    converged = parse_lines(fixture_log(2, FAKE_SLEEP_S="0"))
    assert build_record(converged, goal=Goal(target=0.925)).epochs_to_target == round(EVAL_EVERY / TRAIN_SAMPLES, 4)
    assert build_record(converged, goal=LOSS).epochs_to_target == round(9 * EVAL_EVERY / TRAIN_SAMPLES, 4)
