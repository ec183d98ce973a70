"""The Slurm runner: its batch script (golden file) and real runs on a one-node cluster."""

import json
import sys
from pathlib import Path

import pytest

from orchestrator.config.workloads import load_workload
from orchestrator.errors import UsageError
from orchestrator.runners.base import SeedJob
from orchestrator.runners.slurm import SlurmOptions, batch_script

TESTS = Path(__file__).resolve().parents[1]
GOLDEN = Path(__file__).parent / "golden" / "batch_script.sh"


def test_batch_script_matches_the_golden_file():
    workload = load_workload(TESTS / "workloads" / "fakebench")
    job = SeedJob(
        run_id="fakebench-qualify-1", seed=7, workload=workload, data_dir=Path("/data/fake"),
        results_dir=Path("/results/run/seeds/7/results"),
        env={"MLTRAIN_PROFILE": "qualify", "QUALITY_THRESHOLD": "0.908", "ODD": "a b'c;$(rm -rf /)"},
        labels={"mltrain.run_id": "fakebench-qualify-1", "mltrain.seed": "7"},
    )
    script = batch_script(
        job, SlurmOptions(partition="gpu", gpus="8", time_limit_minutes=90), project_root=Path("/repo"),
        output=Path("/results/run/seeds/7/slurm-job.out"),
    )
    expected = GOLDEN.read_text().replace("@PYTHON_BIN@", str(Path(sys.executable).parent))
    expected = expected.replace("@WORKLOAD@", str(workload.folder))
    assert script == expected


@pytest.mark.parametrize("gpus", ["all", "0,1", "-1", "x"])
def test_gpu_requests_slurm_cannot_express(gpus):
    with pytest.raises(UsageError, match="none or a GPU count"):
        SlurmOptions(gpus=gpus)


@pytest.mark.slurm
def test_runs_on_slurm_score_like_local_runs(cli, slurm_env, tmp_path: Path):
    r = cli("run", "fakebench", "--seeds", "1-3", "--runner", "slurm", "--results", str(tmp_path / "s"), "--json")
    assert r.code == 0, r.err
    on_slurm = json.loads(r.out)
    local = json.loads(cli("run", "fakebench", "--seeds", "1-3", "--results", str(tmp_path / "l"), "--json").out)
    assert on_slurm["score_ms"] == local["score_ms"]
    seed_dir = next((tmp_path / "s").glob("*/seeds/2"))
    assert (seed_dir / "slurm-job.sh").is_file() and ":::MLLOG" in (seed_dir / "output.log").read_text()


@pytest.mark.slurm
def test_crash_and_wall_clock_limit_on_slurm(cli, slurm_env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    profiles = tmp_path / "seeds.yaml"
    profiles.write_text(
        "workloads:\n  fakebench:\n    qualify: {seeds: '1-2', timeout_minutes: 0.1, dataset: {source: synthetic}}\n"
    )
    monkeypatch.setenv("MLTRAIN_SEEDS_FILE", str(profiles))
    monkeypatch.setenv("FAKE_MODE", "crash")
    monkeypatch.setenv("FAKE_MODE_SEEDS", "1")
    r = cli("run", "fakebench", "--runner", "slurm", "--results", str(tmp_path / "c"), "--json")
    assert r.code == 3
    assert json.loads(r.out)["per_seed"]["1"]["status"] == "crashed"
    monkeypatch.setenv("FAKE_MODE", "hang")
    r = cli("run", "fakebench", "--runner", "slurm", "--results", str(tmp_path / "h"), "--json")
    seeds = json.loads(r.out)["per_seed"]
    assert seeds["1"]["status"] == "timed_out" and seeds["2"]["status"] == "converged"


def test_no_controller_is_a_one_line_error(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=none\nSlurmctldHost=nowhere(127.0.0.1)\nSlurmctldPort=1\n")
    monkeypatch.setenv("SLURM_CONF", str(conf))
    r = cli("run", "fakebench", "--seeds", "1-3", "--runner", "slurm", "--results", str(tmp_path / "r"))
    errors = [line for line in r.err.splitlines() if line.startswith("error:")]
    assert r.code == 3 and len(errors) == 1 and "Traceback" not in r.err
    assert "no Slurm controller answers" in r.err or "sinfo not found" in r.err
