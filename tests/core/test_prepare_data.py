"""`mltrain run --data` through the workload's `prepare`: raw data becomes the folder the seeds read."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from orchestrator.results.store import Store
from tests.conftest import TEST_WORKLOADS


def _raw(tmp_path: Path, text: str = "raw fakebench v1") -> Path:
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "raw.txt").write_text(text)
    return raw


def _manifest(results: Path) -> dict:
    (run_id,) = [p.name for p in results.iterdir() if p.is_dir()]
    return Store(results).open(run_id).manifest.to_json()


def test_raw_data_is_prepared_once_and_the_seeds_read_the_prepared_folder(cli, tmp_path: Path, mltrain_env):
    raw = _raw(tmp_path)
    r = cli("run", "fakebench", "--seeds", "1-3", "--data", str(raw), "--results", str(tmp_path / "a"))
    assert r.code == 0, r.err
    assert f"preparing {raw}" in r.err and "is ready as" in r.err
    manifest = _manifest(tmp_path / "a")
    prepared = Path(manifest["data_dir"])
    cache = Path(mltrain_env["XDG_CACHE_HOME"]) / "mltrain" / "data" / "fakebench" / "prepared"
    assert prepared.parent == cache and json.loads((prepared / "cases.json").read_text())["from"] == "raw fakebench v1"
    dataset = manifest["runner_provenance"]["dataset"]
    assert dataset == {"given": str(raw), "prepared": str(prepared), "prepared_where": "on this host"}

    again = cli("run", "fakebench", "--seeds", "1-3", "--data", str(raw), "--results", str(tmp_path / "b"))
    assert again.code == 0 and "preparing" not in again.err  # the cache answered
    assert _manifest(tmp_path / "b")["data_dir"] == str(prepared)


def test_a_ready_folder_is_used_as_it_is(cli, tmp_path: Path):
    ready = tmp_path / "ready"
    ready.mkdir()
    (ready / "cases.json").write_text("{}")
    r = cli("run", "fakebench", "--seeds", "1-3", "--data", str(ready), "--results", str(tmp_path / "r"))
    assert r.code == 0, r.err
    assert _manifest(tmp_path / "r")["data_dir"] == str(ready) and "is ready as" not in r.err


@pytest.mark.parametrize(
    ("script", "message"),
    [
        ("import sys; sys.stderr.write('error: no raw here\\n'); sys.exit(2)", "fakebench data in"),
        ("print('')", "printed no folder"),
        ("print('/no/such/folder')", "printed /no/such/folder, which is not a folder here"),
    ],
)
def test_a_failed_or_odd_prepare_is_one_line_exit_2_and_writes_nothing(
    cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, script: str, message: str,
):
    workloads = tmp_path / "workloads"
    shutil.copytree(TEST_WORKLOADS / "fakebench", workloads / "fakebench")
    (workloads / "fakebench" / "dataset.py").write_text(script + "\n")
    monkeypatch.setenv("MLTRAIN_WORKLOADS", str(workloads))
    data = tmp_path / "data"
    data.mkdir()
    r = cli("run", "fakebench", "--data", str(data), "--results", str(tmp_path / "results"))
    assert r.code == 2 and message in r.err and r.err.count("\n") == 1 and "Traceback" not in r.err
    assert not (tmp_path / "results").exists() or not any((tmp_path / "results").iterdir())


def test_synthetic_data_made_by_other_dataset_code_is_made_again_not_reused(cli, tmp_path: Path, mltrain_env,
                                                                            monkeypatch: pytest.MonkeyPatch):
    """The synthetic data's cache is keyed by the dataset code's version (the contents of the files
    the workload's `data.code` names) as well as the profile's arguments (issue 37: arguments only,
    and data made by older code was reused without a word)."""
    workloads = tmp_path / "workloads"
    shutil.copytree(TEST_WORKLOADS / "fakebench", workloads / "fakebench", ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setenv("MLTRAIN_WORKLOADS", str(workloads))

    def data_dir(run: str) -> Path:
        r = cli("run", "fakebench", "--seeds", "1-3", "--results", str(tmp_path / run))
        assert r.code == 0, r.err
        return Path(_manifest(tmp_path / run)["data_dir"])

    first = data_dir("a")
    assert data_dir("b") == first  # the same code and arguments: the same data
    dataset = workloads / "fakebench" / "dataset.py"
    dataset.write_text(dataset.read_text() + "\n# a changed dataset code\n")
    changed = data_dir("c")
    assert changed != first and changed.parent == first.parent
    declaration = workloads / "fakebench" / "workload.yaml"  # a workload narrows its code to the files that make data
    declaration.write_text(declaration.read_text().replace("  cli: [python3, dataset.py]\n",
                                                           "  cli: [python3, dataset.py]\n  code: [dataset.py]\n"))
    narrowed = data_dir("d")
    train = workloads / "fakebench" / "fake_train.py"
    train.write_text(train.read_text() + "\n# a changed training code\n")
    assert data_dir("e") == narrowed != changed


def test_a_run_resumed_after_its_dataset_code_changed_goes_on_with_its_synthetic_data(
        cli, tmp_path: Path, mltrain_env, monkeypatch: pytest.MonkeyPatch):
    """Its recorded synthetic set stays its data, and still reads as synthetic (no real_data env)."""
    from orchestrator.config.profiles import load_profiles
    from orchestrator.config.workloads import load_workload
    from orchestrator.session.plan import plan_resume

    workloads = tmp_path / "workloads"
    shutil.copytree(TEST_WORKLOADS / "fakebench", workloads / "fakebench", ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setenv("MLTRAIN_WORKLOADS", str(workloads))
    r = cli("run", "fakebench", "--seeds", "1-3", "--results", str(tmp_path / "a"))
    assert r.code == 0, r.err
    dataset = workloads / "fakebench" / "dataset.py"
    dataset.write_text(dataset.read_text() + "\n# a changed dataset code\n")
    store = Store(tmp_path / "a")
    previous = store.open(store.run_ids()[0])
    plan = plan_resume(load_workload(workloads / "fakebench"), load_profiles(Path(mltrain_env["MLTRAIN_SEEDS_FILE"])),
                       previous, seeds=None, profile=None, data=None, label=None)
    assert str(plan.data_dir) == previous.manifest.data_dir and not plan.real_data


def test_a_data_code_that_names_no_file_is_one_line_exit_2(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    workloads = tmp_path / "workloads"
    shutil.copytree(TEST_WORKLOADS / "fakebench", workloads / "fakebench", ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setenv("MLTRAIN_WORKLOADS", str(workloads))
    declaration = workloads / "fakebench" / "workload.yaml"
    declaration.write_text(declaration.read_text().replace("  cli: [python3, dataset.py]\n",
                                                           "  cli: [python3, dataset.py]\n  code: [datset.py]\n"))
    r = cli("run", "fakebench", "--seeds", "1-3", "--results", str(tmp_path / "r"))
    assert r.code == 2 and "data.code ['datset.py'] names no file" in r.err and len(r.err.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists() or not any((tmp_path / "r").iterdir())
