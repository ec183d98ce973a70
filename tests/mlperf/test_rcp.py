"""Our own mlperf-profile runs: mlperf_logging's RCP checker on the seeds' own logs, the scaling
factor MLCommons derives from it (written to scaling.json in the export), both numbers shown, the
package checker's verdict kept, and plain words where the check fails or has no RCP."""

from __future__ import annotations

import json
import shutil
import socket
from pathlib import Path

import pytest
from mlperf_logging.rcp_checker import rcp_checker
from mlperf_logging.result_summarizer.result_summarizer import _compute_strong_score_standalone

from orchestrator.mlperf import mllog
from orchestrator.mlperf.parity import rcp_verdict
from orchestrator.mlperf.quality import Goal
from orchestrator.render.tables import mlcommons_lines
from orchestrator.results.records import Manifest, MlcommonsCheck, RunStatus, ScoringRule, SeedState, SeedStateName
from orchestrator.results.store import Store, new_run_id, now_iso
from orchestrator.session import loop

from .published_layout import Run, unet3d_log, unet3d_runs

RCP_56_MEAN = 357404.44444444444 / 168
"""Epochs of the 4.0.0 unet3d RCP for batch size 56 (its olympic mean of samples to converge / 168)."""


def folder_of(tmp_path: Path, runs: list[Run], **log_options) -> tuple[Path, dict]:
    folder = tmp_path / "sys" / "unet3d"
    folder.mkdir(parents=True)
    records = {}
    for i, run in enumerate(runs):
        text = unet3d_log(run, **log_options)
        (folder / f"result_{i}.txt").write_text(text)
        records[i] = mllog.build_record(mllog.parse_lines(text.splitlines()), goal=Goal(target=0.908))
    return folder, records


def test_no_rcp_for_this_batch_size(tmp_path: Path):
    folder, records = folder_of(tmp_path, unet3d_runs(), gbs=2)
    verdict = rcp_verdict(folder, records, "unet3d", "4.0.0", "closed")
    assert verdict.state == "no_rcp" and verdict.batch_size == 2 and verdict.table_batch_sizes == (28, 56, 64, 84)
    assert verdict.detail.startswith("no RCP for batch size 2 in the training 4.0.0 unet3d RCP table"
                                     " (it has batch sizes 28, 56, 64, 84); the checker passes: RCP not found but"
                                     " slower convergence on smaller batch size")
    # it compared with the smallest batch size's RCP (28: 2054.6 epochs) and scaled, as MLCommons would
    assert verdict.scaling_factor == pytest.approx(345166.95652173914 / 168 / 2050, rel=1e-9)
    assert verdict.detail.endswith(f"MLCommons scales the score by {verdict.scaling_factor:.6g}")


def test_an_rcp_failure_is_said_plainly(tmp_path: Path):
    folder, records = folder_of(tmp_path, [Run(epochs=1500, epoch_ms=100, seed=i) for i in range(40)])
    verdict = rcp_verdict(folder, records, "unet3d", "4.0.0", "closed")
    assert verdict.state == "fail" and verdict.scaling_factor == 1.0 and not (folder / "scaling.json").exists()
    assert verdict.detail.startswith("FAILED: the runs converge faster than the training 4.0.0 unet3d RCP table"
                                     " allows for batch size 56")
    check = MlcommonsCheck(folder=str(folder), ruleset="4.0.0", summarizer_score_min=1.0, agrees=True, rcp=verdict)
    assert f"RCP check: {verdict.detail}" in mlcommons_lines(check)


def test_logs_counting_epochs_are_not_compared_with_a_table_counting_samples(tmp_path: Path):
    folder, records = folder_of(tmp_path, unet3d_runs(), in_samples=False)
    verdict = rcp_verdict(folder, records, "unet3d", "4.0.0", "closed")
    assert verdict.state == "not_comparable" and not (folder / "scaling.json").exists()
    assert "counts samples to converge and these logs count epochs" in verdict.detail


def test_open_division_results_are_not_rcp_checked(tmp_path: Path):
    folder, records = folder_of(tmp_path, unet3d_runs(), division="open")
    verdict = rcp_verdict(folder, records, "unet3d", "4.0.0", "open")
    assert verdict.state == "not_applied" and "closed-division results only" in verdict.detail


@pytest.fixture(scope="module")
def own_run(tmp_path_factory: pytest.TempPathFactory):
    """An mlperf-profile run of ours whose 40 seeds converge a little faster than the RCP mean for
    batch size 56 (olympic mean 2050 epochs): MLCommons scales its score. Stored as `mltrain run`
    stores it, then finished by the run loop."""
    results = tmp_path_factory.mktemp("own") / "results"
    runs = unet3d_runs()
    manifest = Manifest(
        run_id=new_run_id("fakebench", "mlperf"), workload="fakebench", benchmark="unet3d", profile="mlperf",
        mlperf_result=True, seeds=tuple(range(1, 41)), seeds_random=True, runner="local", target=0.908,
        rule=ScoringRule(drop_per_end=4, max_non_converged=4, runs_required=40), host=socket.gethostname(),
        started_at=now_iso(), state="running",
    )
    run = Store(results).create(manifest)
    for seed, one in zip(manifest.seeds, runs, strict=True):
        paths = run.paths.seed(seed)
        paths.root.mkdir(parents=True, exist_ok=True)
        paths.output.write_text("starting\n" + unet3d_log(one))
        record = mllog.build_record(mllog.parse_file(paths.output), goal=Goal(target=0.908))
        run.save_seed(SeedState(seed=seed, state=SeedStateName.FINISHED, status=record.status), record)
    loop.finish(run)
    return Store(results).open(manifest.run_id)


def test_the_score_is_scaled_as_mlcommons_scales_it(own_run, tmp_path: Path):
    summary = own_run.summary
    check = summary.mlcommons
    assert check.rcp.state == "pass" and check.rcp.batch_size == 56
    assert summary.scaling_factor == pytest.approx(RCP_56_MEAN / 2050, rel=1e-9)
    assert check.scaling_factor == summary.scaling_factor and check.scaling_source == "the RCP checker"
    # MLCommons' own procedure on the seeds' own logs: the RCP checker writes scaling.json, the
    # summarizer applies it
    source = tmp_path / "sys" / "unet3d"
    source.mkdir(parents=True)
    for i, seed in enumerate(sorted(own_run.records)):
        shutil.copyfile(own_run.paths.seed(seed).output, source / f"result_{i}.txt")
    passed, _, _ = rcp_checker.check_directory(str(source), "training", "4.0.0", False, False, rcp_file=None,
                                               rcp_pass="pruned_rcps", rcp_bypass=False, set_scaling=True)
    _, _, theirs, _, factor = _compute_strong_score_standalone("unet3d", "sys", False, str(source), "training",
                                                                "4.0.0", return_full_scores=True)
    assert passed and factor == summary.scaling_factor
    assert summary.scaled_score_ms / 60000 == pytest.approx(theirs, rel=1e-9, abs=0)
    assert check.agrees and check.source.startswith("copies of the seeds' own logs")
    assert summary.scaled_score_ms == pytest.approx(summary.score_ms * summary.scaling_factor, rel=1e-15)


def test_the_export_carries_scaling_json_and_the_package_checker_verdict(own_run):
    check = own_run.summary.mlcommons
    scaling = next(Path(check.folder).glob("results/*/unet3d/scaling.json"))
    assert json.loads(scaling.read_text())["scaling_factor"] == pytest.approx(own_run.summary.scaling_factor)
    assert check.package is not None and check.package.passed, check.package
    assert check.division == "closed"
    assert json.loads(next(Path(check.folder).glob("systems/*.json")).read_text())["division"] == "closed"


def test_show_says_both_numbers_and_the_verdicts(own_run, cli):
    shown = cli("show", own_run.run_id, "--results", str(own_run.store.root)).out
    assert "time-to-train (olympic mean of 32)" in shown
    assert "MLPerf score: olympic mean x RCP scaling factor 1.0377" in shown and "(the RCP checker)" in shown
    assert "RCP check: passed (RCP found, batch size 56); MLCommons scales the score by 1.0377" in shown
    assert "package checker on " in shown and ": passed" in shown
    assert all(r.status is RunStatus.CONVERGED for r in own_run.records.values())
