"""`mltrain infer` and the run store: a full disk is exit 3 naming the file with nothing half-written
and the store still listing its runs; an index another process holds never fails a run whose folder
is written (the index catches up at the next read, as for training runs)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.core.test_full_disk import NO_SPACE, assert_nothing_half_written, listed
from tests.core.test_full_disk import disk as full_disk
from tests.core.test_store_safety import index_held  # noqa: F401,F811 - a fixture, found by name
from tests.hardware.stored_runs import make_run
from tests.inference import tiny
from tests.inference.test_infer_cli import assets as tiny_assets

assets = tiny_assets  # the tiny model and dataset, made once for this module too
disk = full_disk


def infer(cli, assets: tuple[Path, Path], results: Path, *args: str):
    model, data = assets
    return cli("infer", "resnet50", "--profile", "qualify", "--model", str(model), "--data", str(data),
               "--results", str(results), "--count", str(tiny.IMAGES), "--scenario", "Offline", "--time", "0.3",
               *args)


def test_an_inference_run_whose_record_cannot_be_finished_is_exit_3_and_kept_as_failed(cli, assets, tmp_path: Path,
                                                                                        disk):
    results = tmp_path / "results"
    earlier = make_run(results, label=None, seeds=[1, 2, 3])
    disk.when(lambda path, data: path.name == "inference.json" and b'"state": "finished"' in data)
    r = infer(cli, assets, results)
    assert r.code == 3, r.err
    (run,) = [p for p in results.iterdir() if p.is_dir() and p.name != earlier]
    assert f"error: cannot write {run / 'inference.json'}: {NO_SPACE}" in r.err.splitlines()
    record = json.loads((run / "inference.json").read_text())
    assert record["state"] == "failed" and record["failure"] == f"cannot write {run / 'inference.json'}: {NO_SPACE}"
    assert_nothing_half_written(results)
    disk.free()
    assert sorted(listed(cli, results)) == sorted([earlier, run.name])


def test_an_inference_run_whose_first_write_fails_leaves_no_folder(cli, assets, tmp_path: Path, disk):
    results = tmp_path / "results"
    earlier = make_run(results, label=None, seeds=[1, 2, 3])
    disk.when(lambda path, data: path.name == "inference.json")
    r = infer(cli, assets, results)
    assert r.code == 3 and f"/inference.json: {NO_SPACE}" in r.err, r.err
    assert [p.name for p in results.iterdir() if p.is_dir()] == [earlier]
    disk.free()
    assert listed(cli, results) == [earlier]


def test_an_index_another_process_holds_does_not_fail_an_inference_run(cli, assets, index_held,  # noqa: F811
                                                                        monkeypatch):
    from orchestrator.results import index as index_module

    monkeypatch.setattr(index_module, "READ_WAIT_S", 0.5)
    results, _ = index_held
    r = infer(cli, assets, results, "--json")
    assert r.code in (0, 1), r.err  # its own verdict, not exit 2 after the run was made
    run_id = json.loads(r.out)["run_id"]
    assert "is held by another process (it waited 0.5 s): the index catches up at the next listing" in r.err
    listing = cli("list", "--results", str(results), "--json")
    assert run_id in [row["run_id"] for row in json.loads(listing.out)]



def test_the_exit_code_and_list_follow_one_rule_per_profile(cli, assets, tmp_path: Path):
    """A smoke run whose 3 s test LoadGen calls INVALID (min duration not met, the host's) but whose
    pipeline ran and whose accuracy met its target passes: exit 0, and `list` says valid; a qualify run
    the same is INVALID in both (before: the exit code and `list` each had their own rule)."""
    from orchestrator.results.inference import InferenceRun

    results = tmp_path / "results"
    r = infer(cli, assets, results, "--accuracy", "--json")
    assert r.code in (0, 1), r.err
    record = json.loads(r.out)
    path = results / record["run_id"] / "inference.json"
    performance = {**record["result"]["performance"], "loadgen_valid": False,
                   "loadgen_reasons": ["min duration not met"]}
    accuracy = {**record["result"]["accuracy"], "target_percent": 0.0, "met": True}
    for profile, passed in (("smoke", True), ("qualify", False)):
        changed = {**record, "profile": profile,
                   "result": {**record["result"], "performance": performance, "accuracy": accuracy}}
        path.write_text(json.dumps(changed))
        run = InferenceRun.model_validate(changed)
        assert run.passed is passed
        (row,) = json.loads(cli("list", "--results", str(results), "--json").out)
        assert row["valid"] == passed, (profile, row)
