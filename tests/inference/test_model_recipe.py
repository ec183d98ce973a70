"""The recipe for a new inference model (docs/new_inference_model.md), followed by a toy in a copy of the
tree: its one file (tests/inference/toy_model.py, as models/toy.py, its smoke maker in it) and its
entry in inference.yaml, nothing else edited; `mltrain infer toy --profile smoke` makes its smoke
model and data, runs the real LoadGen and scores it, and `infer --help` lists it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import copy_of_the_tree
from tests.inference import toy_model


def tree_with_the_toy(tmp_path: Path) -> Path:
    tree = copy_of_the_tree(tmp_path / "tree")
    shutil.copy2(Path(toy_model.__file__), tree / "workloads" / "inference" / "models" / "toy.py")  # its file
    declaration = tree / "workloads" / "inference" / "inference.yaml"
    declaration.write_text(declaration.read_text().rstrip("\n") + "\n" + toy_model.ENTRY)  # its entry
    return tree


def test_a_toy_model_added_by_the_recipe_runs_its_smoke_profile_end_to_end(mltrain_env, tmp_path: Path):
    tree = tree_with_the_toy(tmp_path)
    env = {**os.environ, **mltrain_env, "PYTHONPATH": str(tree)}
    env.pop("MLTRAIN_WORKLOADS", None)

    def mltrain(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "orchestrator.cli", *args], cwd=tree, env=env,
                              capture_output=True, text=True, timeout=600)

    helped = mltrain("infer", "--help")
    assert helped.returncode == 0 and "toy (each harness's" in " ".join(helped.stdout.split()), helped.stdout
    done = mltrain("infer", "toy", "--profile", "smoke", "--scenario", "Offline", "--results",
                   str(tmp_path / "r"), "--json")
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout)
    assert record["model"] == "toy" and record["profile"] == "smoke"
    assert record["result"]["accuracy"]["line"] == f"accuracy=100.000%, good={toy_model.SAMPLES}, " \
                                                   f"total={toy_model.SAMPLES}"
    smoke = Path(mltrain_env["XDG_CACHE_HOME"]) / "mltrain" / "data" / "inference" / "toy-smoke"
    assert (smoke / "model.onnx").is_file() and (smoke / "data" / "toy.npz").is_file()
