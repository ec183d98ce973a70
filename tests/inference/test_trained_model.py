"""`--model RUN` and `mltrain export RUN --model FILE` refusing, in one line and before anything is
written, what cannot become an inference model: a name that is neither a file nor a run, a run whose
workload declares no export, an inference run, no target at all. (The loop that works is in
test_smoke_3d_unet.py, slow.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest


@pytest.fixture
def fake_run(cli, tmp_path: Path) -> tuple[Path, str]:
    results = tmp_path / "r"
    r = cli("run", "fakebench", "--profile", "smoke", "--seeds", "1", "--results", str(results), "--json")
    assert r.code in (0, 1), r.err
    return results, json.loads(r.out)["run_id"]


def test_a_model_that_is_neither_a_file_nor_a_run(cli, tmp_path: Path):
    data = tmp_path / "data"
    data.mkdir()
    r = cli("infer", "3d-unet", "--profile", "qualify", "--model", "nosuchrun", "--data", str(data),
            "--results", str(tmp_path / "r"))
    assert r.code == 2 and r.err.startswith("error: --model nosuchrun: no such file, nor a run in ")
    assert r.err.count("\n") == 1


def test_a_run_whose_workload_exports_nothing(cli, fake_run, tmp_path: Path):
    results, run_id = fake_run
    before = sorted(p.name for p in results.iterdir())
    exported = cli("export", run_id, "--model", str(tmp_path / "m.onnx"), "--results", str(results))
    assert exported.code == 2 and "trained fakebench, whose workload.yaml declares no export" in exported.err
    inferred = cli("infer", "3d-unet", "--profile", "smoke", "--model", run_id, "--results", str(results))
    assert inferred.code == 2 and "declares no export" in inferred.err
    assert sorted(p.name for p in results.iterdir()) == before and not (tmp_path / "m.onnx").exists()


def test_export_needs_one_target_and_a_seed_only_with_a_model(cli, fake_run, tmp_path: Path):
    results, run_id = fake_run
    neither = cli("export", run_id, "--results", str(results))
    assert neither.code == 2 and "give --mlcommons DIR (the MLCommons layout) or --model FILE" in neither.err
    both = cli("export", run_id, "--model", str(tmp_path / "m.onnx"), "--mlcommons", str(tmp_path / "x"),
               "--results", str(results))
    assert both.code == 2 and "one of them" in both.err
    seed = cli("export", run_id, "--mlcommons", str(tmp_path / "x"), "--seed", "1", "--results", str(results))
    assert seed.code == 2 and "--seed chooses the seed of --model" in seed.err
