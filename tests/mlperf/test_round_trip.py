"""export -> import -> score of one run tells one story: the same number, the same verdict, the same
exit; export and import say what they compare and show both numbers; the same logs import once."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.results.store import Store
from tests.hardware.stored_runs import make_run

SEEDS = list(range(1, 10))


def _said(out: str) -> str:
    return " ".join(out.split())


def _olympic(out: str) -> str:
    return next(line for line in out.splitlines() if "olympic mean" in line)


@pytest.fixture
def smoke_run(tmp_path: Path) -> tuple[Path, str]:
    results = tmp_path / "results"
    return results, make_run(results, label="smoke", seeds=SEEDS, profile="smoke",
                             env={"FAKE_EPOCH_JITTER": "0.2", "FAKE_EPOCH_MS": "700"})


def test_export_of_a_smoke_run_compares_like_with_like_and_says_the_runs_own_score(cli, smoke_run, tmp_path):
    results, run_id = smoke_run
    folder = tmp_path / "export"
    r = cli("export", run_id, "--mlcommons", str(folder), "--results", str(results))
    assert r.code == 0, r.err
    said = _said(r.out)
    assert "DIFFERENT" not in said
    theirs = said.split("the mean of the rest; at most 4 not converged): ")[1].split(" min")[0]
    assert f"mltrain on the same logs by the same rule: {theirs} min -> same score" in said
    assert f"run {run_id}'s own score, by its smoke profile's rule (the 1 fastest and 1 slowest dropped" in said
    assert "[smoke: proves the pipeline, comparable with nothing] result_summarizer" in r.out
    data = json.loads(cli("export", run_id, "--mlcommons", str(tmp_path / "again"), "--results", str(results),
                             "--json").out)
    assert data["same_score"] and data["summarizer_minutes"] == data["mltrain_minutes"]
    assert data["summarizer_rule"]["drop_per_end"] == 4 and data["run_rule"]["drop_per_end"] == 1
    # the command it gives to check it yourself: the summarizer itself, its score in the csv it names
    command = data["check"].split(" (it prints")[0].split()
    assert command[:3] == ["python", "-m", "mlperf_logging.result_summarizer"]
    done = subprocess.run([sys.executable, *command[1:]], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = list(csv.DictReader((tmp_path / "again" / "summary.csv").open()))
    assert float(rows[0]["unet3d"]) == pytest.approx(data["summarizer_minutes"], rel=1e-9)
    assert not (tmp_path / "summary.json").exists()  # written beside the csv, not into the current folder


def test_export_import_score_tell_one_story_and_the_same_logs_import_once(cli, smoke_run, tmp_path):
    results, run_id = smoke_run
    folder = tmp_path / "export"
    assert cli("export", run_id, "--mlcommons", str(folder), "--results", str(results)).code == 0
    original = cli("score", run_id, "--results", str(results))
    imported = cli("import", str(folder), "--benchmark", "unet3d", "--results", str(results))
    assert imported.code == original.code == 0, imported.err
    assert f"an mltrain export of run {run_id}: scored by its smoke profile's target 0.908 and rule" in _said(
        imported.err)
    new_id = next(row["run_id"] for row in Store(results).list().rows if row["runner"] == "imported")
    again = cli("score", new_id, "--results", str(results))
    assert again.code == 0 and _olympic(again.out) == _olympic(original.out) == _olympic(imported.out)
    assert "result: VALID" in again.out and "result: VALID" in original.out
    run = Store(results).open(new_id)
    assert sorted(run.records) == SEEDS and run.manifest.profile == "smoke" and run.manifest.rule.drop_per_end == 1
    said = _said(imported.out)
    assert "mltrain on the same logs by the summarizer's rule (the 4 fastest and 4 slowest dropped" in said
    assert "-> agrees" in said and "DISAGREES" not in said
    twice = cli("import", str(folder), "--benchmark", "unet3d", "--results", str(results))
    assert twice.code == 2 and f"these logs were imported already as run {new_id}" in _said(twice.err)
    assert len(Store(results).list().rows) == 2


def test_an_invalid_run_is_invalid_with_exit_1_at_every_step(cli, tmp_path: Path):
    results = tmp_path / "results"
    run_id = make_run(results, label="bad", seeds=SEEDS, profile="smoke",
                      env={"FAKE_MODE": "no_converge", "FAKE_MODE_SEEDS": "2,5"})
    assert cli("score", run_id, "--results", str(results)).code == 1
    folder = tmp_path / "export"
    assert cli("export", run_id, "--mlcommons", str(folder), "--results", str(results)).code == 1
    imported = cli("import", str(folder), "--benchmark", "unet3d", "--results", str(results))
    assert imported.code == 1 and "result: INVALID: 2 runs did not converge" in imported.out


def test_a_damaged_export_record_is_one_line(cli, smoke_run, tmp_path: Path):
    results, run_id = smoke_run
    folder = tmp_path / "export"
    assert cli("export", run_id, "--mlcommons", str(folder), "--results", str(results)).code == 0
    record = next(folder.glob("results/*/unet3d/mltrain.json"))
    record.write_text('{"run_id": "x"}')
    r = cli("import", str(folder), "--benchmark", "unet3d", "--results", str(results))
    assert r.code == 2 and f"{record}: not the record of an mltrain export" in _said(r.err)
