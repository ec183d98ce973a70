"""benchmarks/gpu_session.sh on the interpreter a bare GPU machine has (torch and numpy, nothing
else, no index): the kit tools/gpu_kit.py makes here is all it installs from, and every part that
needs no GPU runs to the end. Here the CUDA parts are skipped and say so; on a GPU machine the same
script runs them (the device tool's session)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from tests.installs import PROJECT, SOURCES, TORCH, make_venv, run, user_env

pytestmark = pytest.mark.slow


def checkout_copy(dest: Path) -> Path:
    """What the device tool sends: the tracked sources, scripts and tests (no venv, no results)."""
    for name in (*SOURCES, "benchmarks", "tools", "tests", "qualify.yaml"):
        origin = PROJECT / name
        if origin.is_dir():
            shutil.copytree(origin, dest / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info"))
        else:
            dest.mkdir(parents=True, exist_ok=True)
            shutil.copy2(origin, dest / name)
    return dest


def test_the_gpu_session_installs_from_its_kit_alone_and_runs_what_needs_no_gpu(tmp_path: Path):
    bin_dir = make_venv(tmp_path / "bare", [TORCH, "numpy"])
    python = bin_dir / "python"
    project = checkout_copy(tmp_path / "project")
    env = user_env(bin_dir, XDG_CACHE_HOME=str(tmp_path / "cache"), HOME=str(tmp_path / "home"))
    version = run([str(python), "-c", "import sys; print(f'{sys.version_info[0]}.{sys.version_info[1]}')"],
                  cwd=tmp_path, env=env).stdout.strip()
    kit = tmp_path / "kit"
    made = run([str(python), "tools/gpu_kit.py", "--out", str(kit), "--python-version", version], cwd=project,
               env=user_env(Path(sys.executable).parent), timeout=600)
    assert "kit ready" in made.stdout
    names = {p.name.split("-")[0].lower() for p in (kit / "wheels").glob("*.whl")}
    assert {"pydantic", "mlperf_logging", "nibabel", "typer", "pytest"} <= names and not {"torch", "numpy"} & names
    # Nothing of mltrain's is importable before the session installs it.
    before = run([str(python), "-c", "import pydantic"], cwd=tmp_path, env=env, check=False)
    assert before.returncode != 0

    out = tmp_path / "out"
    done = run(["bash", "benchmarks/gpu_session.sh"], cwd=project, timeout=1200, check=False,
               env={**env, "PYTHON": str(python), "KIT": str(kit), "OUT": str(out), "PIP_NO_INDEX": "1",
                    "PIP_FIND_LINKS": "", "PIP_CONFIG_FILE": os.devnull})  # the kit and nothing else
    summary = (out / "summary.txt").read_text()
    assert done.returncode == 0, summary + (out / "session.log").read_text()[-4000:]
    lines = {line.split()[0]: line for line in summary.splitlines() if line.strip()}
    assert "exit 0" in lines["install"] and "exit 0" in lines["smoke"], summary
    for part in ("cuda_tests", "unet3d", "resnet50", "qualify"):
        assert "skipped: no CUDA device" in lines[part], summary
    log = (out / "session.log").read_text()
    assert "result: VALID" in log and "seed 3: converged" in log, log[-3000:]
    assert (bin_dir / "mltrain").is_file()  # the entry point a user runs


def test_the_gpu_session_without_a_kit_says_how_to_make_one(tmp_path: Path):
    done = run(["bash", str(PROJECT / "benchmarks" / "gpu_session.sh")], cwd=tmp_path, check=False,
               env={**user_env(Path("/usr/bin")), "KIT": str(tmp_path / "nokit"), "OUT": str(tmp_path / "out")})
    assert done.returncode == 2
    assert "python3 tools/gpu_kit.py --out" in done.stderr


def test_a_kit_made_for_another_pyproject_is_refused(tmp_path: Path):
    """A kit made before a dependency was added would fail in pip's words, on the GPU machine's time."""
    kit = tmp_path / "kit"
    (kit / "wheels").mkdir(parents=True)
    (kit / "MANIFEST.txt").write_text("target: CPython 3.12, manylinux x86_64\npyproject: " + "0" * 64 + "\n")
    done = run(["bash", "benchmarks/gpu_session.sh"], cwd=PROJECT, check=False,
               env={**user_env(Path("/usr/bin")), "KIT": str(kit), "OUT": str(tmp_path / "out")})
    assert done.returncode == 2
    assert "was made for another pyproject.toml: make it again" in done.stderr
