"""Damaged or odd results folders, and one rule per fact a run shows: a results path the file system
cannot take, a current folder deleted under the shell, a run id of another kind of run, a run whose
process is gone. Each is one line with its exit code, never an internal error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.results.inference import InferenceRun
from orchestrator.results.store import Store, now_iso
from tests.hardware.stored_runs import make_run


def inference_run(results: Path, run_id: str = "resnet50-qualify-x", state: str = "finished") -> str:
    record = InferenceRun(run_id=run_id, model="resnet50", harness="inference", profile="qualify",
                          scenario="Offline", backend="onnxruntime", device="cpu", accuracy_requested=False,
                          model_file="/m.onnx", model_sha256="0" * 64, data_dir="/d", runner="local",
                          started_at=now_iso(), state=state)
    Store(results).create_inference(record).close()
    return run_id


@pytest.mark.parametrize("argv", [("list",), ("run", "fakebench", "--seeds", "1"), ("qualify", "history")])
def test_a_results_path_with_a_name_over_name_max_is_one_line(cli, tmp_path: Path, argv):
    too_long = tmp_path / ("x" * 300) / "results"
    r = cli(*argv, "--results", str(too_long))
    assert r.code == 2 and r.err.splitlines() == [f"error: results folder {too_long}: File name too long"]


def test_a_deleted_current_folder_is_named_not_an_internal_error(cli, tmp_path: Path, monkeypatch):
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    monkeypatch.delenv("MLTRAIN_RESULTS", raising=False)
    for argv in (("list",), ("list", "--results", "results"), ("run", "fakebench", "--seeds", "1")):
        r = cli(*argv)
        assert r.code == 2, (argv, r.err)
        assert r.err.splitlines() == ["error: the current folder no longer exists (it was deleted): cd to a folder"
                                      " that exists, or give --results (or MLTRAIN_RESULTS) an absolute path"]


@pytest.mark.parametrize("argv", [("score", "{id}"), ("run", "fakebench", "--resume", "{id}")])
def test_an_inference_run_id_given_for_a_training_run_is_named_as_one(cli, tmp_path: Path, argv):
    results = tmp_path / "results"
    run_id = inference_run(results)
    r = cli(*[a.format(id=run_id) for a in argv], "--results", str(results))
    assert r.code == 2 and r.err.splitlines() == [
        f"error: run {run_id} is an inference run: `mltrain show {run_id}` shows it, `mltrain infer` makes another"
        " (score and --resume take training runs)"]


def test_a_qualification_id_given_for_a_run_is_named_as_one(cli, tmp_path: Path):
    results = tmp_path / "results"
    node = results / "qualify" / "nodes" / "n1"
    node.mkdir(parents=True)
    (node / "n1-quick-20260101-000000-abcd.json").write_text("{}")
    r = cli("score", "n1-quick-20260101-000000-abcd", "--results", str(results))
    assert r.code == 2 and "is a node qualification: `mltrain qualify history` shows it" in r.err


def test_a_run_whose_process_is_gone_is_stopped_in_list_and_show_alike(cli, tmp_path: Path):
    results = tmp_path / "results"
    training = make_run(results, label=None, seeds=[1, 2, 3])
    manifest = results / training / "manifest.json"
    manifest.write_text(json.dumps({**json.loads(manifest.read_text()), "state": "running"}))  # as a SIGKILL leaves it
    inference = inference_run(results, state="running")
    for run_id in (training, inference):
        listed = {row["run_id"]: row["state"] for row in json.loads(cli("list", "--results", str(results),
                                                                        "--json").out)}
        shown = cli("show", run_id, "--results", str(results))
        shown_json = json.loads(cli("show", run_id, "--results", str(results), "--json").out)
        assert listed[run_id] == "stopped"
        assert "state stopped" in " ".join(shown.out.split()) and "running" not in shown.out
        assert shown_json.get("manifest", shown_json)["state"] == "stopped"
    held = Store(results).open(training).locked()  # a live process holds it: running it is
    try:
        assert "state running" in cli("show", training, "--results", str(results)).out
    finally:
        held.close()


def test_a_run_folder_that_is_a_file_is_refused_in_one_line(tmp_path: Path):
    from orchestrator.errors import StoreError

    results = tmp_path / "results"
    results.mkdir()
    (results / "taken").write_text("not a run")
    with pytest.raises(StoreError, match=r"taken is a file where the folder of run taken belongs") as refused:
        inference_run(results, run_id="taken")
    assert refused.value.exit_code == 2 and (results / "taken").read_text() == "not a run"
