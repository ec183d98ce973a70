"""What a killed `mltrain qualify` left running is stopped by the next one, on every runner that can
run its jobs: a process of this host (local), a container (Docker), a node job (the fleet on Slurm).
A qualification in progress is left alone: only one whose lock nobody holds is abandoned."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from tests.core.running import wait_for, workload_processes

HANG = {"FAKE_THROUGHPUT_MODE": "hang"}


def _killed_while_its_throughput_hangs(cli_process, results: Path, *runner: str) -> subprocess.Popen[str]:
    child = cli_process("qualify", "--suite", "throughput_only", "--results", str(results), "--node-name", "n1",
                        *runner, extra_env=HANG)
    wait_for(lambda: _hangs(results.glob("qualify/nodes/n1/*/throughput/output.log")), 120, "the throughput to hang")
    return child


def _hangs(logs) -> bool:
    """The throughput mode printed its last line and hangs (a worker killed while it still prints to a
    pipe nobody reads dies of it: only a silent one outlives its mltrain)."""
    return any('"resolved_settings"' in log.read_text() for log in logs)


def _qualify_again(cli, results: Path, *runner: str) -> tuple[int, str]:
    r = cli("qualify", "--suite", "throughput_only", "--results", str(results), "--node-name", "n1", "--json",
            "--expect-gpus", "0", *runner)  # a CPU node, declared so: it may PASS
    assert json.loads(r.out)["checks"], r.err
    return r.code, r.err


def test_a_killed_qualify_leaves_no_process_once_the_next_qualify_runs(cli, cli_process, tmp_path: Path):
    results = tmp_path / "r"
    child = _killed_while_its_throughput_hangs(cli_process, results)
    worker = wait_for(lambda: workload_processes(results, "fake_throughput.py"), 60, "the throughput's python")[0]
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    # the job's leader (bash) dies with mltrain; its python goes on, as a killed seed's does
    wait_for(lambda: workload_processes(results) == [worker], 10, "the leader to die with mltrain")
    (lock,) = results.glob("qualify/nodes/n1/*/qualify.lock")

    code, err = _qualify_again(cli, results)
    assert code == 0, err
    assert f"{lock.parent.name}: stopped what an earlier mltrain left running: process {worker}" in err
    assert workload_processes(results) == [] and not lock.exists()
    assert list(results.glob("qualify/nodes/n1/*/qualify.lock")) == []  # the second ended in order


def test_a_qualify_in_progress_is_not_taken_for_a_killed_one(cli, cli_process, tmp_path: Path):
    results = tmp_path / "r"
    child = _killed_while_its_throughput_hangs(cli_process, results)
    worker = wait_for(lambda: workload_processes(results, "fake_throughput.py"), 60, "the throughput's python")[0]
    try:
        code, err = _qualify_again(cli, results)
        assert code == 0, err
        assert "stopped what an earlier mltrain left running" not in err
        assert worker in workload_processes(results)  # the first qualification's job runs on
    finally:
        os.killpg(child.pid, signal.SIGTERM)  # it stops its job in order
        child.communicate(timeout=120)
    assert workload_processes(results) == []


@pytest.mark.docker
@pytest.mark.usefixtures("docker_engine", "no_leftover_containers")
def test_a_killed_qualify_leaves_no_container_once_the_next_qualify_runs(
    cli_with_build, cli_process, containers, test_base_image: str, tmp_path: Path,
):
    results = tmp_path / "r"
    docker = ("--runner", "docker")
    child = _killed_while_its_throughput_hangs(cli_process, results, *docker)
    (left,) = wait_for(lambda: [c for c in containers() if c.status == "running"
                                and c.labels.get("mltrain.job") == "throughput"], 120, "the throughput's container")
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    assert [c.name for c in containers() if c.status == "running"] == [left.name]  # it outlives mltrain

    code, err = _qualify_again(cli_with_build, results, *docker)
    assert code == 0, err
    assert f"stopped what an earlier mltrain left running: container {left.name}" in err
    assert containers() == []


@pytest.mark.slurm
def test_a_killed_fleet_leaves_no_node_job_once_the_next_fleet_runs(cli, cli_process, slurm_env, tmp_path: Path):
    results = tmp_path / "r"

    def fleet_jobs() -> list[str]:
        listed = subprocess.run(["squeue", "--me", "-h", "-o", "%i %j"], capture_output=True, text=True, timeout=60)
        return [line.split()[0] for line in listed.stdout.splitlines() if "-node-" in line]

    from orchestrator.runners.slurm import node_names

    node = node_names()[0]  # one node job is enough to be left behind (the CI's cluster has two)
    child = cli_process("qualify", "--runner", "slurm", "--nodes", node, "--suite", "throughput_only", "--results",
                        str(results), extra_env=HANG)  # sbatch passes the hang on to the node's own qualify
    node_logs = "qualify/nodes/*/*/throughput/output.log"
    wait_for(lambda: _hangs(results.glob(node_logs)), 120, "the node's throughput to hang")
    job_id = wait_for(fleet_jobs, 30, "the node job")[0]
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    assert fleet_jobs() == [job_id]  # the killed mltrain's node job goes on

    r = cli("qualify", "--runner", "slurm", "--nodes", node, "--suite", "throughput_only", "--results", str(results))
    assert r.code == 0, r.err
    assert f"stopped what an earlier mltrain left running: slurm job {job_id}" in r.err
    assert fleet_jobs() == []
