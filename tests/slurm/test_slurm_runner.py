"""The Slurm runner: its batch script (golden file, refused values, the #SBATCH injection) and real runs
on a one-node cluster (leftovers of a killed mltrain cancelled on resume)."""

import dataclasses
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from orchestrator.config.workloads import load_workload
from orchestrator.errors import UsageError
from orchestrator.results.paths import SeedPaths
from orchestrator.runners.slurm import SlurmJob, SlurmOptions, batch_script, node_names
from orchestrator.session.seed import seed_spec

TESTS = Path(__file__).resolve().parents[1]
GOLDEN = Path(__file__).parent / "golden" / "batch_script.sh"


def test_batch_script_matches_the_golden_file(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)  # the script numbers GPUs in PCI bus order unless told
    workload = load_workload(TESTS / "workloads" / "fakebench")
    job = seed_spec(
        run_id="fakebench-qualify-1", seed=7, workload=workload, data_dir=Path("/data/fake"),
        paths=SeedPaths(Path("/results/run/seeds/7")),
        env={"MLTRAIN_PROFILE": "qualify", "QUALITY_THRESHOLD": "0.908", "ODD": "a b'c;$(rm -rf /)"},
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


def _job(**changes):
    workload = load_workload(TESTS / "workloads" / "fakebench")
    job = seed_spec(run_id="fakebench-qualify-1", seed=7, workload=workload, data_dir=Path("/data/fake"),
                    paths=SeedPaths(Path("/results/run/seeds/7")), env={"MLTRAIN_PROFILE": "qualify"})
    return dataclasses.replace(job, **changes)


@pytest.mark.parametrize(
    ("changes", "partition", "message"),
    [
        ({}, "debug\n#SBATCH --wrap=id", "--partition 'debug\\n#SBATCH --wrap=id' has a control character"),
        ({}, "debug\rid", "has a control character"),
        ({}, "a b", "--partition 'a b' holds ' ', which sbatch does not read back"),
        ({}, "gpu#x", "holds '#'"),
        ({}, "gpu;id", "is not a Slurm name"),
        ({}, "gpu,", "is not a Slurm name"),
        ({"folder": Path("/r s/run/seeds/7")}, None, "the job folder '/r s/run/seeds/7/slurm-job.out'"),
        ({"folder": Path("/r%j/run/seeds/7")}, None, "holds '%'"),
        ({"folder": Path("/r\n/run/seeds/7")}, None, "has a control character"),
        ({"folder": Path("/it's/seeds/7")}, None, "holds \"'\""),
        ({"data_dir": Path("/data\nrm -rf ~")}, None, "environment variable DATADIR '/data\\nrm -rf ~' has a control"),
        ({"env": {"ODD": "a\nb"}}, None, "environment variable ODD 'a\\nb' has a control character"),
        ({"env": {"A B": "x"}}, None, "environment variable 'A B' of the profile is not a shell variable name"),
        ({"labels": {"note": "a b"}}, None, "note=a b' holds ' '"),
    ],
)
def test_values_a_batch_script_cannot_carry_are_refused_naming_them(changes, partition, message):
    job = _job(**changes)
    with pytest.raises(UsageError) as refused:
        batch_script(job, SlurmOptions(partition=partition), project_root=Path("/repo"),
                     output=job.paths.slurm_output)
    assert message in str(refused.value)


def test_slurm_options_refuse_a_bad_partition_at_once():
    with pytest.raises(UsageError, match="control character"):
        SlurmOptions(partition="debug\ntouch /tmp/x #")
    assert SlurmOptions(partition="gpu,cpu-long.v2").partition == "gpu,cpu-long.v2"


@pytest.mark.slurm
def test_the_sbatch_newline_injection_is_reproduced_and_mltrain_refuses_it(cli, slurm_env, tmp_path: Path):
    """shlex.quote does not protect an #SBATCH line: sbatch reads quotes and backslashes its own way,
    so a value can close its quotes for sbatch and still carry a newline; what follows the newline
    runs as shell in the job. Reproduced with the quoting mltrain used to do; refused now."""
    marker = tmp_path / "PWNED"
    evil = f"{tmp_path}/r\\''\ntouch {marker} #"  # balanced quotes for sbatch, then a line of shell
    script = tmp_path / "quoted-the-old-way.sh"
    script.write_text(f"#!/bin/bash\n#SBATCH --output={shlex.quote(evil)}\necho the job ran\n")
    submitted = subprocess.run(["sbatch", "--parsable", str(script)], capture_output=True, text=True, timeout=60)
    assert submitted.returncode == 0, submitted.stderr
    SlurmJob(submitted.stdout.strip().split(";")[0], Path(os.devnull)).wait()
    assert marker.exists(), "the injection did not run: the reproduction failed"
    marker.unlink()

    results = tmp_path / "results"
    for given in (["--results", evil], ["--results", str(results), "--partition", f"debug\ntouch {marker} #"],
                  ["--results", f"{tmp_path}/r\\''x"]):
        r = cli("run", "fakebench", "--seeds", "1", "--runner", "slurm", *given)
        assert r.code == 2 and r.err.count("\n") == 1, r.err
        assert "control character" in r.err or "which sbatch does not read back" in r.err, r.err
    assert not marker.exists() and not results.exists()
    # besides the old script, only its job's output (named as sbatch read the value) was written
    assert sorted(p.name for p in tmp_path.iterdir()) == ["quoted-the-old-way.sh", "r'\"''\""]


@pytest.mark.slurm
def test_jobs_a_killed_mltrain_left_are_cancelled_on_resume(cli, cli_process, slurm_env, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch):
    profiles = tmp_path / "seeds.yaml"
    profiles.write_text("workloads:\n  fakebench:\n    qualify: {seeds: '1-2', timeout_minutes: 0.1,"
                        " dataset: {source: synthetic}, env: {FAKE_MODE: hang, FAKE_MODE_SEEDS: '1'}}\n")
    monkeypatch.setenv("MLTRAIN_SEEDS_FILE", str(profiles))
    results = tmp_path / "results"
    nodes = "2" if len(node_names()) > 1 else "1"  # a seed across nodes where the cluster has them
    child = cli_process("run", "fakebench", "--runner", "slurm", "--nodes", nodes, "--results", str(results),
                        extra_env={"MLTRAIN_SEEDS_FILE": str(profiles)})

    def running_jobs() -> list[str]:
        listed = subprocess.run(["squeue", "--me", "-h", "-o", "%i %j %T"], capture_output=True, text=True)
        return [line for line in listed.stdout.splitlines() if "mltrain-fakebench-qualify-" in line
                and "RUNNING" in line]

    deadline = time.monotonic() + 60
    while not running_jobs():
        assert time.monotonic() < deadline, "seed 1's job never ran"
        time.sleep(0.2)
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    left = running_jobs()
    assert len(left) == 1  # the killed mltrain's job goes on running
    job_id = left[0].split()[0]
    run_id = next(p.parent.name for p in results.glob("*/manifest.json"))
    r = cli("run", "fakebench", "--resume", run_id, "--results", str(results), "--json")
    assert f"stopped what an earlier mltrain left running: slurm job {job_id}" in r.err
    assert r.code == 3  # seed 1 hangs again and meets the wall-clock limit
    assert not running_jobs()
    assert (results / run_id / "seeds" / "1" / "attempt-1" / "slurm-job.out").is_file()
    placed = json.loads((results / run_id / "seeds" / "1" / "run.json").read_text())["placement"]
    assert (len(placed["nodes"]) if placed else 1) == int(nodes), placed  # resumed on as many nodes


@pytest.mark.parametrize(
    ("state", "code", "status", "says"),
    [
        ("NODE_FAIL", "0:0", "killed", "the node was lost"),
        ("PREEMPTED", "0:0", "killed", "preempted"),
        ("TIMEOUT", "0:15", "killed", "Slurm's own time limit"),
        ("OUT_OF_MEMORY", "0:125", "out_of_memory", "OUT_OF_MEMORY"),
        ("FAILED", "1:0", "crashed", "FAILED"),
    ],
)
def test_a_job_ended_from_outside_is_an_infrastructure_fault(monkeypatch, state, code, status, says):
    """A lost node cannot be staged on a one-node test cluster: the states Slurm reports are fed in."""
    from orchestrator.mlperf import mllog
    from orchestrator.mlperf.quality import Goal
    from orchestrator.runners import slurm

    monkeypatch.setattr(slurm, "job_state", lambda job_id: (state, code))
    ended = SlurmJob("42", Path(os.devnull)).wait()
    record = mllog.build_record(mllog.parse_lines([]), goal=Goal(target=0.9), exit=ended)
    assert record.status.value == status and says in record.reason
