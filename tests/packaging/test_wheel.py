"""The wheel, installed into a fresh venv on a machine that has torch, runs a one-seed unet3d smoke
run from an empty folder outside the checkout: profiles, workload folders and Dockerfiles come from
the package, every other requirement from the index, results land in ./results of that folder,
nothing in site-packages."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from tests.installs import PROJECT, build_wheel, make_venv, preinstalled, run, user_env

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """mltrain's wheel, built once for the module's tests."""
    return build_wheel(tmp_path_factory.mktemp("dist"))


def test_the_wheel_carries_profiles_workloads_and_dockerfiles(wheel: Path):
    names = set(zipfile.ZipFile(wheel).namelist())
    data_files = [path.relative_to(PROJECT).as_posix() for root in ("orchestrator", "workloads")
                  for path in (PROJECT / root).rglob("*")
                  if path.is_file() and path.suffix not in (".py", ".pyc", ".md") and "__pycache__" not in path.parts]
    assert data_files and not [name for name in data_files if name not in names]  # every data file ships
    for needed in ("orchestrator/bundled/seeds.yaml", "orchestrator/bundled/docker/unet3d.Dockerfile",
                   "orchestrator/bundled/docker/resnet50.Dockerfile", "workloads/unet3d/workload.yaml",
                   "workloads/unet3d/run_and_time.sh", "workloads/unet3d/checksum.json",
                   "workloads/unet3d/evaluation_cases.txt", "workloads/resnet50/workload.yaml",
                   "workloads/resnet50/run_and_time.sh", "workloads/common/__init__.py",
                   "workloads/common/precision.py", "orchestrator/cli.py"):
        assert needed in names, needed
    assert not [n for n in names if n.startswith(("tests/", "results/")) or "__pycache__" in n]
    # the bundle maps the repository root: only its data ships, never a module
    assert not [n for n in names if n.startswith("orchestrator/bundled/") and n.endswith(".py")]


def test_an_installed_wheel_runs_a_smoke_seed_from_an_empty_folder(wheel: Path, tmp_path: Path):
    bin_dir = make_venv(tmp_path / "venv", [f"{wheel}[workloads]"], base=preinstalled(tmp_path / "machine", "torch"))
    here = tmp_path / "somewhere"
    here.mkdir()
    env = user_env(bin_dir, XDG_CACHE_HOME=str(tmp_path / "cache"))
    assert run([str(bin_dir / "mltrain"), "--version"], cwd=here, env=env).stdout.startswith("mltrain ")
    r = run([str(bin_dir / "mltrain"), "-q", "run", "unet3d", "--profile", "smoke", "--seeds", "1", "--json"],
            cwd=here, env=env, timeout=900, check=False)
    summary = json.loads(r.stdout) if r.stdout.strip() else {}
    assert summary, r.stderr[-3000:]
    assert summary["per_seed"]["1"]["status"] in ("converged", "not_converged"), summary["per_seed"]
    assert r.returncode == (0 if summary["valid"] else 1)
    (run_dir,) = [p for p in (here / "results").iterdir() if p.is_dir()]
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["profile"] == "smoke" and manifest["data_dir"].startswith(str(tmp_path / "cache"))
    assert (run_dir / "seeds" / "1" / "output.log").is_file() and (here / "results" / "index.db").is_file()
    written_in_the_install = [p for name in ("index.db", "manifest.json") for p in (tmp_path / "venv").rglob(name)]
    assert not written_in_the_install
