"""Dataset commands in the workload's image (`--runner docker`): synthesize and prepare run in a
helper container, with the host folders mounted, and leave no container behind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.results.store import Store

pytestmark = [pytest.mark.docker, pytest.mark.usefixtures("docker_engine", "no_leftover_containers")]


def test_raw_data_is_prepared_in_the_workload_image(docker_cli, tmp_path: Path, mltrain_env):
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "raw.txt").write_text("raw for the container")
    results = tmp_path / "results"
    r = docker_cli("run", "fakebench", "--runner", "docker", "--gpus", "none", "--seeds", "1-3",
                   "--data", str(raw), "--results", str(results), "--json")
    assert r.code == 0, r.err
    (run_id,) = [p.name for p in results.iterdir() if p.is_dir()]
    manifest = Store(results).open(run_id).manifest
    dataset = manifest.runner_provenance["dataset"]
    image = manifest.runner_provenance["image"]["tag"]
    assert dataset["given"] == str(raw) and dataset["prepared_where"] == f"in {image}"
    prepared = Path(manifest.data_dir)
    cache = Path(mltrain_env["XDG_CACHE_HOME"]) / "mltrain" / "data" / "fakebench" / "prepared"
    assert prepared.parent == cache  # the container's /mnt/mltrain/... path, mapped back to the host
    assert json.loads((prepared / "cases.json").read_text())["from"] == "raw for the container"
    assert all(p.stat().st_uid == raw.stat().st_uid for p in prepared.iterdir())


def test_a_refusal_in_the_container_is_the_workloads_one_line(docker_cli, tmp_path: Path):
    empty = tmp_path / "empty"
    empty.mkdir()
    r = docker_cli("run", "fakebench", "--runner", "docker", "--gpus", "none", "--data", str(empty),
                   "--results", str(tmp_path / "results"))
    assert r.code == 2 and "cases.json missing: not a fakebench dataset" in r.err
    last = r.err.splitlines()[-1]
    assert f"{empty}: cases.json missing" in last and "/mnt/mltrain" not in last  # the container's path, mapped back
