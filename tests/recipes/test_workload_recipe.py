"""The recipe for a new workload (docs/new_workload.md), followed by a toy in a copy of the tree: its
folder (tests/recipes/toy_workload/, as workloads/toy/), its profile block in seeds.yaml and its line in
pyproject's package list, nothing else edited. `mltrain run toy --profile smoke` makes its synthetic
data, runs its seeds and scores them; it implements no MLPerf benchmark (`compliance: false`), so its
logs of a few keys are not held to its benchmark's compliance checker, and it has no mlperf profile."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.config.profiles import load_profiles
from orchestrator.config.workloads import load_workload
from orchestrator.errors import UsageError
from orchestrator.results.store import Store
from orchestrator.session.plan import profile_for
from tests.conftest import TREE, copy_of_the_tree

TOY = Path(__file__).resolve().parent / "toy_workload"
COPIED = (*TREE, "tests/packaging/test_package_list.py")
PROFILES = """\
  toy:
    qualify:
      seeds: "1-5"
      timeout_minutes: 5
      dataset: {source: synthetic, args: ["64"]}
    smoke:
      seeds: "1-3"
      timeout_minutes: 2
      dataset: {source: synthetic, args: ["32"]}
"""
"""Its profile block, at the end of seeds.yaml's `workloads:` (a workload that implements no MLPerf
benchmark has no mlperf profile)."""
PACKAGE = '"workloads.toy",'
"""Its line in pyproject.toml's [tool.setuptools] packages (its code is a package: workloads.toy)."""


def tree_with_the_toy(tmp_path: Path) -> Path:
    tree = copy_of_the_tree(tmp_path / "tree", COPIED)
    shutil.copytree(TOY, tree / "workloads" / "toy", ignore=shutil.ignore_patterns("__pycache__"))  # its folder
    seeds = tree / "seeds.yaml"
    seeds.write_text(seeds.read_text().rstrip("\n") + "\n" + PROFILES)  # its profile block
    pyproject = tree / "pyproject.toml"
    listed = pyproject.read_text().replace('packages = [\n', f'packages = [\n    {PACKAGE}\n', 1)  # its package
    assert listed != pyproject.read_text()
    pyproject.write_text(listed)
    return tree


def test_a_toy_workload_added_by_the_recipe_runs_its_smoke_profile_end_to_end(mltrain_env, tmp_path: Path):
    tree = tree_with_the_toy(tmp_path)
    env = {**os.environ, **mltrain_env, "PYTHONPATH": str(tree)}
    env.pop("MLTRAIN_WORKLOADS", None)
    env.pop("MLTRAIN_SEEDS_FILE", None)
    results = tmp_path / "results"

    def mltrain(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "orchestrator.cli", *args], cwd=tree, env=env,
                              capture_output=True, text=True, timeout=300)

    done = mltrain("run", "toy", "--profile", "smoke", "--results", str(results), "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["profile"] == "smoke" and summary["converged"] == 3 and summary["valid"], summary
    store = Store(results)
    run = store.open(store.run_ids()[0])
    assert run.manifest.workload == "toy" and run.manifest.benchmark == "unet3d"
    for record in run.records.values():
        assert record.status.value == "converged" and record.compliance is None  # opted out: no verdict
        assert record.best_accuracy is not None and record.best_accuracy <= 0.05
    with pytest.raises(UsageError, match="toy declares compliance: false .*: it has no mlperf profile"):
        profile_for(load_workload(tree / "workloads" / "toy"), load_profiles(tree / "seeds.yaml"), "mlperf")
    copied = importlib.util.spec_from_file_location("copied_package_list", tree / COPIED[-1])
    assert copied is not None and copied.loader is not None
    package_list = importlib.util.module_from_spec(copied)
    copied.loader.exec_module(package_list)
    package_list.test_the_listed_packages_are_the_packages_of_the_tree()  # the copy's: the wheel's list names it
