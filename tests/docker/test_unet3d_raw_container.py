"""Raw data in, score out, from a host without torch: synthetic raw KiTS19 (the workload's own
`generate-raw`) is prepared inside the unet3d image (the host venv holds only the orchestrator's
dependencies: no torch, no nibabel), then one seed trains in a container and is scored.

Slow (a fresh venv, the unet3d image on the local torch base, a short training): run with
``pytest -m slow tests/docker``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.installs import build_wheel, make_venv, run, user_env

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.usefixtures("docker_engine", "no_leftover_containers")]

PROFILE = """\
default_profile: smoke
workloads:
  unet3d:
    smoke:
      seeds: "1"
      drop_per_end: 0
      max_non_converged: 0
      target: 0.5
      timeout_minutes: 10
      dataset: {source: real, args: [--min-shape, "24"]}
      env: {FILTERS: "8,16,32", INPUT_SHAPE: "24,24,24", BATCH_SIZE: "2", LEARNING_RATE: "1.0",
            LR_WARMUP_EPOCHS: "2", START_EVAL_AT: "4", EVALUATE_EVERY: "1", MAX_EPOCHS: "30", AMP: "none",
            NUM_WORKERS: "0"}
"""
"""The smoke profile's model and schedule, in fp32, on raw data instead of its synthetic set."""


def test_raw_kits19_in_score_out_from_a_host_without_torch(torch_base_image: str, tmp_path: Path):
    from workloads.unet3d.dataset import main as unet3d_dataset

    raw = tmp_path / "kits19"
    assert unet3d_dataset(["generate-raw", str(raw), "--cases", "40", "--seed", "0", "--size", "24,24,24",
                           "--workers", "1"]) == 0
    bin_dir = make_venv(tmp_path / "venv", [str(build_wheel(tmp_path / "dist"))])
    for module in ("torch", "nibabel"):
        absent = run([str(bin_dir / "python"), "-c", f"import {module}"], cwd=tmp_path, env=user_env(bin_dir),
                     check=False)
        assert absent.returncode != 0, f"{module} is installed in the host venv"
    profiles = tmp_path / "seeds.yaml"
    profiles.write_text(PROFILE)
    here = tmp_path / "somewhere"
    here.mkdir()
    env = user_env(bin_dir, MLTRAIN_SEEDS_FILE=str(profiles), MLTRAIN_BASE_IMAGE=torch_base_image,
                   XDG_CACHE_HOME=str(tmp_path / "cache"))
    r = run([str(bin_dir / "mltrain"), "run", "unet3d", "--profile", "smoke", "--runner", "docker", "--gpus", "none",
             "--data", str(raw), "--json"], cwd=here, env=env, timeout=900, check=False)
    summary = json.loads(r.stdout) if r.stdout.strip() else {}
    assert summary, r.stderr[-3000:]
    assert summary["per_seed"]["1"]["status"] == "converged", (summary["per_seed"], r.stderr[-2000:])
    assert r.returncode == 0 and summary["valid"] and summary["score_ms"] > 0

    (run_dir,) = [p for p in (here / "results").iterdir() if p.is_dir()]
    manifest = json.loads((run_dir / "manifest.json").read_text())
    provenance = manifest["runner_provenance"]
    assert provenance["dataset"]["given"] == str(raw)
    assert provenance["dataset"]["prepared_where"] == f"in {provenance['image']['tag']}"
    prepared = Path(manifest["data_dir"])
    assert prepared.parent == tmp_path / "cache" / "mltrain" / "data" / "unet3d" / "prepared"
    assert prepared.name.startswith("kits19-") and (prepared / ".mltrain-ready").is_file()
    assert len(list(prepared.glob("case_*_x.npy"))) == 40
    software = json.loads((prepared / "manifest.json").read_text())["software"]
    assert software["torch"] == provenance["versions"]["torch"]  # preprocessed by the image's torch
