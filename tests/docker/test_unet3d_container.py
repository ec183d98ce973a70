"""The real unet3d smoke run inside containers, on the CPU, from a locally built Python/torch base.

Slow (the torch base image is built once and cached by .ci/base-images.sh; then three short
trainings): run with ``pytest -m slow tests/docker``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.usefixtures("docker_engine", "no_leftover_containers")]

PROJECT = Path(__file__).resolve().parents[2]


def test_unet3d_smoke_runs_in_containers(cli_with_build, torch_base_image: str, tmp_path: Path, monkeypatch):
    if not (PROJECT / "workloads" / "unet3d" / "workload.yaml").is_file():
        pytest.skip("the unet3d workload is not in this tree")
    monkeypatch.setenv("MLTRAIN_SEEDS_FILE", str(PROJECT / "seeds.yaml"))
    monkeypatch.setenv("MLTRAIN_BASE_IMAGE", torch_base_image)
    results = tmp_path / "results"
    r = cli_with_build("run", "unet3d", "--profile", "smoke", "--runner", "docker", "--gpus", "none",
                       "--seeds", "1-3", "--results", str(results), "--json")
    summary = json.loads(r.out) if r.out.strip() else {}
    assert summary, r.err[-3000:]
    # Every container ran the workload to its own end: no crash, kill, timeout or OOM. Whether the
    # smoke profile converges is the profile's business (`mltrain run` exits 1 when it does not).
    statuses = {s: v["status"] for s, v in summary["per_seed"].items()}
    assert set(statuses) == {"1", "2", "3"}
    assert set(statuses.values()) <= {"converged", "not_converged", "diverged"}, statuses
    assert r.code == (0 if summary["valid"] else 1)
    run_id = next(p.name for p in results.iterdir() if p.is_dir())
    manifest = json.loads((results / run_id / "manifest.json").read_text())
    provenance = manifest["runner_provenance"]
    assert provenance["base_image"]["ref"] == torch_base_image
    assert provenance["versions"]["torch"].startswith("2.13.0") and provenance["versions"]["cuda"] is None
    for seed in ("1", "2", "3"):
        folder = results / run_id / "seeds" / seed / "results"
        files = list(folder.iterdir())
        assert files and all(f.stat().st_uid == os.getuid() for f in files)
