"""Stored and imported values are validated on load: finite, in their range, consistent with where
they live. A damaged smoke cache was trusted (a negative reference top-1 made the accuracy target
negative); damaged inference records (NaN, -1e308 metrics) were compared and reported with exit 0; a
stored run of 2^53 ms was a converged seed of 285,000 years."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.hardware.stored_runs import make_run
from tests.inference import tiny


def _smoke_cache(cache: Path, facts: dict) -> Path:
    folder = cache / "mltrain" / "data" / "inference" / "resnet50-smoke"
    folder.mkdir(parents=True)
    (folder / "smoke.json").write_text(json.dumps(facts))
    return folder / "smoke.json"


GOOD_SMOKE = {"model": "resnet50", "reference_top1": 0.5, "input_shape": [3, 32, 32],
              "harness_args": ["--image-size", "32,32"], "seconds": 40.0}


@pytest.mark.parametrize(("change", "said"), [
    ({"reference_top1": -0.5}, "field reference_top1: Input should be greater than or equal to 0"),
    ({"reference_top1": float("nan")}, "field reference_top1"),
    ({"input_shape": [3, 0, 32]}, "field input_shape.1"),
    ({"model": "retinanet"}, "the smoke facts of 'retinanet', in the folder of 'resnet50'"),
])
def test_a_damaged_smoke_cache_is_named_not_trusted(cli, mltrain_env, tmp_path: Path, change: dict, said: str):
    marker = _smoke_cache(Path(mltrain_env["XDG_CACHE_HOME"]), {**GOOD_SMOKE, **change})
    r = cli("infer", "resnet50", "--profile", "smoke", "--results", str(tmp_path / "r"))
    assert r.code == 2 and r.err.count("\n") == 1, r.err
    assert f"{marker}: " in r.err and said in r.err and "is made again" in r.err, r.err
    assert not (tmp_path / "r").exists()


@pytest.fixture(scope="module")
def inference_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """Two stored inference runs of the tiny model (labels a and b), made once."""
    import os
    import subprocess
    import sys

    from tests.conftest import PROJECT, TEST_WORKLOADS

    folder = tmp_path_factory.mktemp("inference")
    model, data = tiny.export(folder / "tiny.onnx"), tiny.dataset(folder / "data")
    env = {**os.environ, "MLTRAIN_WORKLOADS": str(TEST_WORKLOADS), "XDG_CACHE_HOME": str(folder / "cache")}
    ids = []
    for label in ("a", "b"):
        done = subprocess.run([sys.executable, "-m", "orchestrator.cli", "infer", "resnet50", "--model", str(model),
                               "--data", str(data), "--results", str(folder / "r"), "--count", str(tiny.IMAGES),
                               "--time", "0.2", "--label", label, "--json"],
                              cwd=PROJECT, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode in (0, 1), done.stderr
        ids.append(json.loads(done.stdout)["run_id"])
    return folder / "r", ids


@pytest.mark.parametrize(("path", "value"), [
    (("result", "performance", "value"), float("nan")),
    (("result", "performance", "value"), -1e308),
    (("result", "performance", "latency", "percentiles_ns", "90.00"), float("inf")),
    (("result", "harness", "model_load_s"), float("nan")),
])
def test_a_damaged_inference_record_is_named_by_list_and_refused_by_compare(
        cli, inference_runs, tmp_path: Path, path: tuple[str, ...], value: float):
    import shutil

    results = tmp_path / "r"
    shutil.copytree(inference_runs[0], results)
    damaged = results / inference_runs[1][0] / "inference.json"
    record = json.loads(damaged.read_text())
    holder = record
    for key in path[:-1]:
        holder = holder[key]
    holder[path[-1]] = value
    damaged.write_text(json.dumps(record))
    listed = cli("list", "--results", str(results), "--json")
    assert listed.code == 2 and f"{damaged}: field {'.'.join(path)}" in listed.err, listed.err
    assert [row["run_id"] for row in json.loads(listed.out)] == [inference_runs[1][1]]
    compared = cli("compare", "--label", "a", "--label", "b", "--results", str(results))
    assert compared.code == 2 and compared.out == "", (compared.code, compared.err)  # nothing compared
    (said,) = compared.err.splitlines()  # where label a may be: the record that cannot be read, named
    assert said.startswith(f"error: no readable run in {results} carries the label 'a'; a run there cannot be read: "
                           f"{damaged}: field {'.'.join(path)}"), said


def test_a_stored_run_of_285000_years_is_named_not_scored(cli, tmp_path: Path):
    results = tmp_path / "r"
    run_id = make_run(results, label="a", seeds=[1, 2, 3])
    record = results / run_id / "seeds" / "1" / "run.json"
    data = json.loads(record.read_text())
    data["run_stop_ms"] = data["run_start_ms"] + 2**53
    data["time_to_train_ms"] = 2**53
    record.write_text(json.dumps(data))
    r = cli("show", run_id, "--results", str(results))
    assert r.code == 2 and f"{record}: " in r.err and "is more than a year: not a time a run took" in r.err, r.err
