"""`--model RUN` and `mltrain export RUN --model FILE` refusing, in one line and before anything is
written, what cannot become an inference model: a name that is neither a file nor a run, a run whose
workload declares no export, an inference run, no target at all. (The loop that works is in
test_smoke_3d_unet.py, slow.)"""

from __future__ import annotations

import json
import os
import warnings
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


class _Runs:
    """A pickle that runs a shell command as it loads."""

    def __reduce__(self):
        import os

        return (os.system, ("touch pwned",))


@pytest.mark.parametrize("damage", ["json-text", "json-list", "json-deep", "json-window", "pickle-runs-code",
                                    "pt-fifo", "json-loop"])
def test_a_damaged_or_hostile_seed_folder_is_one_line_and_exit_2(damage: str, tmp_path: Path, capsys,
                                                                 monkeypatch):
    """The export reads model.json checked and model.pt as tensors only: a damaged file or a pickle
    that would run a command is refused in one line (before: a traceback, exit 1)."""
    import pickle

    from workloads.unet3d.export import main, save
    from workloads.unet3d.model import UNet3D, UNet3DConfig

    seed = tmp_path / "seed"
    seed.mkdir()
    net = UNet3D(UNet3DConfig(filters=(2, 4)))
    save(net, net.config, (16, 16, 16), seed, {"status": "success"})
    facts = json.loads((seed / "model.json").read_text())
    if damage == "json-text":
        (seed / "model.json").write_text('{"filters": [2, ')
    elif damage == "json-list":
        (seed / "model.json").write_text("[1, 2]")
    elif damage == "json-deep":
        (seed / "model.json").write_text("[" * 100_000 + "]" * 100_000)
    elif damage == "json-window":
        (seed / "model.json").write_text(json.dumps({**facts, "window": [16, "x"]}))
    elif damage == "pt-fifo":  # named as what it is, never "no trained weights", never opened
        (seed / "model.pt").unlink()
        os.mkfifo(seed / "model.pt")
    elif damage == "json-loop":
        (seed / "model.json").unlink()
        (seed / "model.json").symlink_to(seed / "model.json")
    else:
        (seed / "model.pt").write_bytes(pickle.dumps({"weight": _Runs()}))
    monkeypatch.chdir(tmp_path)
    with warnings.catch_warnings(record=True) as warned:  # a warning is a line on the user's stderr too
        warnings.simplefilter("always")
        code = main([str(seed), str(tmp_path / "m.onnx")])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith("unet3d export: ") and "Traceback" not in err
    assert [str(w.message) for w in warned] == []
    if damage == "pt-fifo":
        assert err == f"unet3d export: {seed / 'model.pt'}: a FIFO, not a file\n"
    if damage == "json-loop":
        assert err == f"unet3d export: {seed / 'model.json'}: a symbolic link loop, not a file\n"
    assert not (tmp_path / "pwned").exists() and not (tmp_path / "m.onnx").exists()


def test_a_run_whose_seeds_never_converged_says_which_seed_it_exports(cli, mltrain_env, monkeypatch, tmp_path: Path):
    """No seed reached its target: the seed exported is named, and that it did not converge (before:
    the first finished seed, without a word)."""
    import shutil
    import sys

    from tests.conftest import TEST_WORKLOADS

    workloads = tmp_path / "workloads"
    shutil.copytree(TEST_WORKLOADS / "fakebench", workloads / "fakebench")
    export = [sys.executable, "-c", "import sys, pathlib; pathlib.Path(sys.argv[2]).write_bytes(b'x')"]
    with (workloads / "fakebench" / "workload.yaml").open("a") as yaml:
        yaml.write(f"export: {{cli: {json.dumps(export)}, feeds: 3d-unet}}\n")
    monkeypatch.setenv("MLTRAIN_WORKLOADS", str(workloads))
    monkeypatch.setenv("FAKE_MODE", "no_converge")
    results = tmp_path / "r"
    r = cli("run", "fakebench", "--profile", "smoke", "--seeds", "1-2", "--results", str(results), "--json")
    assert r.code in (0, 1), r.err
    run_id = json.loads(r.out)["run_id"]
    exported = cli("export", run_id, "--model", str(tmp_path / "m.onnx"), "--results", str(results), "--json")
    assert exported.code == 0, exported.err
    assert json.loads(exported.out)["seed"] == 1
    assert (f"warning: {run_id} seed 1 did not reach its quality target" in exported.err
            and "no seed of the run converged" in exported.err)
