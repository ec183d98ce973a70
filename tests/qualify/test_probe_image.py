"""The image carries the probe: it is a package of workloads/ (workloads/common/probe/), which every
workload's build context holds and every Dockerfile copies to /workspace, its working directory. The
probe runs from an image's build context alone (no project, no orchestrator on its path), and its
code never imports the orchestrator. (tests/qualify/test_docker.py runs it in a real container.)"""

from __future__ import annotations

import ast
import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from orchestrator.config.workloads import Registry
from orchestrator.runners.docker.images import build_spec, context_tar
from tests.conftest import PROJECT, TEST_WORKLOADS
from workloads.common.probe import registry

PROBE = PROJECT / "workloads" / "common" / "probe"
PROBE_FILES = {f"workloads/common/probe/{path.name}" for path in PROBE.glob("*.py")}


@pytest.mark.parametrize(("root", "name"), [(PROJECT / "workloads", "unet3d"), (PROJECT / "workloads", "resnet50"),
                                            (TEST_WORKLOADS, "fakebench")])
def test_every_workload_image_carries_the_probe(root: Path, name: str):
    workload = Registry([root]).get(name)
    spec = build_spec(workload, PROJECT)
    names = {f.name for f in spec.files}
    assert {f"workloads/common/probe/{check}.py" for check in registry.CHECKS} <= PROBE_FILES
    assert PROBE_FILES | {"workloads/common/__init__.py", "workloads/common/precision.py"} <= names
    dockerfile = spec.dockerfile.read_text()
    assert "WORKDIR /workspace" in dockerfile and "COPY workloads/ /workspace/workloads/" in dockerfile


def test_the_probe_runs_from_an_image_context_alone(tmp_path: Path):
    """What `docker build` gets for unet3d, unpacked: ``python -m workloads.common.probe`` from its
    /workspace finds the probe there and measures (the CPU here)."""
    with tarfile.open(fileobj=io.BytesIO(context_tar(build_spec(Registry([PROJECT / "workloads"]).get("unet3d"),
                                                                 PROJECT)))) as tar:
        tar.extractall(tmp_path, filter="data")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    where = subprocess.run([sys.executable, "-c", "import workloads.common.probe as p; print(p.__file__)"],
                           cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert where.stdout.strip() == str(tmp_path / "workloads" / "common" / "probe" / "__init__.py"), where.stderr
    env["MLTRAIN_PROBE_CONFIG"] = json.dumps({"device": "cpu", "seconds_per_case": 0.01, "order": ["gemm"],
                                              "cpu": {"gemm": {"dense": [[32, 32, 32]]}}})
    r = subprocess.run([sys.executable, "-m", "workloads.common.probe", "3"], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = [json.loads(line.removeprefix(":::PROBE ")) for line in r.stdout.splitlines()]
    assert [line["kind"] for line in lines] == ["device", "result", "timing"]
    assert lines[0]["protocol"] == 2 and lines[0]["seed"] == 3 and lines[0]["device"] == "cpu"
    assert lines[1]["metric"] == "gemm_fp32_32x32x32" and lines[1]["sanity"]["passed"] is True


def test_the_probe_never_imports_the_orchestrator():
    imported = set()
    for path in PROBE.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                imported.add(node.module)
    assert {"torch", "workloads.common", "workloads.common.probe.protocol"} <= imported  # the walk saw them
    assert not [name for name in imported if name.split(".")[0] == "orchestrator"]
