"""Imports of folders in MLCommons' published layout score exactly as mlperf_logging's result
summarizer scores the ORIGINAL folder (olympic mean x scaling.json), to 1e-9 relative."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from mlperf_logging.result_summarizer.result_summarizer import _compute_strong_score_standalone

from orchestrator.results.store import Store

from .published_layout import Run, resnet_folder, system_description, unet3d_folder, unet3d_runs, write_benchmark

NON_COMPLIANT = 7
SCALING = 1.0109450109450109


def summarizer(folder: Path, benchmark: str) -> tuple[float | None, float]:
    """The summarizer itself on the original folder: (score in minutes, scaling factor it read)."""
    _, _, score, _, factor = _compute_strong_score_standalone(
        benchmark, folder.parent.name, False, str(folder), "training", "4.0.0", return_full_scores=True)
    return score, factor


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A submission folder: 40 unet3d runs (NVIDIA-style, epochs counted in samples, one that breaks
    a rule, scaling.json) and a resnet folder with 5 runs."""
    root = tmp_path_factory.mktemp("submission")
    runs = unet3d_runs()
    runs[NON_COMPLIANT] = Run(epochs=runs[NON_COMPLIANT].epochs, epoch_ms=1_500, seed=runs[NON_COMPLIANT].seed,
                              break_rule="eval_samples")  # the fastest run: scored only if the rule is ignored
    unet3d_folder(root, runs=runs, scaling=SCALING)
    resnet_folder(root)
    return root


@pytest.fixture(scope="module")
def imported(published: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """`mltrain import` of the unet3d folder (pointed at the submission folder) and of the resnet folder."""
    import os

    from orchestrator.cli import main

    results = tmp_path_factory.mktemp("results")
    env = {"MLTRAIN_WORKLOADS": str(Path(__file__).parents[1] / "workloads")}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        out = {}
        resnet = published / "results" / "testsys_8xa100" / "resnet"
        for benchmark, folder in (("unet3d", published), ("resnet", resnet)):
            code = main(["-q", "import", str(folder), "--benchmark", benchmark, "--results", str(results)])
            assert code == 0
        for row in Store(results).list().rows:
            out[row["benchmark"]] = Store(results).open(row["run_id"])
        return {"results": results, **out}
    finally:
        for key, value in old.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def test_unet3d_score_equals_the_summarizer_on_the_original_folder(published, imported):
    folder = published / "results" / "testsys_8xh100" / "unet3d"
    theirs, factor = summarizer(folder, "unet3d")
    run = imported["unet3d"]
    summary = run.summary
    assert factor == SCALING and summary.scaling_factor == SCALING
    assert summary.scaled_score_ms / 60000 == pytest.approx(theirs, rel=1e-9, abs=0)
    assert summary.scaled_score_ms == pytest.approx(summary.score_ms * SCALING, rel=1e-15)
    assert summary.non_converged == 1 and summary.valid
    check = summary.mlcommons
    assert check.agrees and check.summarizer_score_min == pytest.approx(theirs, rel=1e-12)
    assert check.source == f"the original folder {folder}" and "scaling.json" in check.scaling_source
    # the file that breaks a rule is not scored, with the checker's one-line reason
    record = run.records[NON_COMPLIANT]
    assert record.status.value == "non_compliant" and "\n" not in record.reason
    assert "CHECK for 'eval_samples' failed" in record.reason and "v['value'] == 42" in record.reason


def test_samples_counted_epochs_become_epochs(imported):
    run = imported["unet3d"]
    epochs = {r.epochs_to_target for r in run.records.values() if r.converged}
    assert epochs == {1800.0, 2300.0}
    record = run.records[0]
    assert record.metadata["epoch_unit"] == "samples" and record.train_samples == 168
    assert record.samples_per_epoch == 168 and record.division == "closed"


def test_resnet_score_equals_the_summarizer(published, imported):
    theirs, factor = summarizer(published / "results" / "testsys_8xa100" / "resnet", "resnet")
    summary = imported["resnet"].summary
    assert factor == 1.0 and summary.scaling_factor == 1.0 and summary.runs == 5
    assert summary.scaled_score_ms / 60000 == pytest.approx(theirs, rel=1e-9, abs=0)
    assert summary.mlcommons.agrees


def test_system_description_is_read_and_shown(imported, cli):
    run = imported["unet3d"]
    assert run.manifest.imported.system == "testsys_8xh100"
    assert run.manifest.imported.system_description["accelerator_model_name"] == "NVIDIA H100-SXM5-80GB"
    assert run.manifest.label == "testsys_8xh100"
    shown = cli("show", run.run_id, "--results", str(imported["results"])).out
    assert "imported from" in shown and "scaling.json 1.01095" in shown and "division: closed" in shown
    assert "x RCP scaling factor 1.01095" in shown and "agrees" in shown


def test_both_numbers_everywhere_a_score_is_shown(imported, cli):
    results = str(imported["results"])
    run = imported["unet3d"]
    scored = json.loads(cli("score", run.run_id, "--results", results, "--json").out)
    assert scored["scaling_factor"] == SCALING
    assert scored["scaled_score_ms"] == pytest.approx(scored["score_ms"] * SCALING)
    listed = json.loads(cli("list", "--results", results, "--json").out)
    row = next(r for r in listed if r["run_id"] == run.run_id)
    assert row["scaled_score_ms"] == pytest.approx(row["score_ms"] * SCALING)
    table = cli("list", "--results", results).out
    assert "MLPerf s" in table
    compared = json.loads(cli("compare", run.run_id, "--results", results, "--json").out)["rows"][0]
    assert compared["scaling_factor"] == SCALING
    assert compared["mlperf_score_ms"]["value"] == pytest.approx(compared["olympic_ms"]["value"] * SCALING)
    text = cli("compare", run.run_id, "--results", results).out
    assert "MLPerf score (x RCP)" in text and "(x1.011)" in text


def test_nvidia_log_names_are_imported(published, tmp_path, cli):
    """<DATESTAMP>_<N>.log as NVIDIA's scripts name them; the summarizer (which reads only result_*.txt)
    runs on byte-identical copies named result_<n>.txt."""
    source = published / "results" / "testsys_8xh100" / "unet3d"
    nvidia = tmp_path / "nvidia"
    nvidia.mkdir()
    for n in range(40):
        shutil.copyfile(source / f"result_{n}.txt", nvidia / f"240425101502186337271_{n + 1}.log")
    shutil.copyfile(source / "scaling.json", nvidia / "scaling.json")
    r = cli("import", str(nvidia), "--benchmark", "unet3d", "--results", str(tmp_path / "r"), "--json")
    assert r.code == 0, r.err
    summary = json.loads(r.out)
    theirs, _ = summarizer(source, "unet3d")
    assert summary["scaled_score_ms"] / 60000 == pytest.approx(theirs, rel=1e-9, abs=0)
    assert summary["mlcommons"]["agrees"] and "named result_<n>.txt" in summary["mlcommons"]["source"]
    run = Store(tmp_path / "r").open(summary["run_id"])
    assert sorted(run.manifest.seeds) == list(range(1, 41))
    assert run.states[1].source == "240425101502186337271_1.log"


def test_a_benchmark_folder_of_several_systems_must_be_named(tmp_path, cli):
    root = tmp_path / "sub"
    for system in ("a", "b"):
        write_benchmark(root, system, "resnet", {}, description=system_description(system))
    r = cli("import", str(root), "--benchmark", "resnet", "--results", str(tmp_path / "r"))
    assert r.code == 2 and "resnet results of 2 systems (a, b)" in r.err and r.err.count("\n") == 1


def test_an_imported_run_exports_with_its_scaling_json_and_published_description(imported, tmp_path, cli):
    run = imported["unet3d"]
    target = tmp_path / "export"
    r = cli("export", run.run_id, "--mlcommons", str(target), "--results", str(imported["results"]), "--json")
    assert r.code == 0, r.err
    written = json.loads(r.out)
    assert written["scaling_factor"] == SCALING and written["same_score"] and written["division"] == "closed"
    folder = target / "results" / "testsys_8xh100" / "unet3d"
    assert json.loads((folder / "scaling.json").read_text()) == {"scaling_factor": SCALING}
    description = json.loads((target / "systems" / "testsys_8xh100.json").read_text())
    assert description["accelerator_model_name"] == "NVIDIA H100-SXM5-80GB" and description["division"] == "closed"
    theirs, _ = summarizer(folder, "unet3d")
    assert written["summarizer_minutes"] == pytest.approx(theirs) == pytest.approx(run.summary.scaled_score_ms / 60000)
