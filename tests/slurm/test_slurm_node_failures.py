"""A node that fails a seed across nodes ends it within a bounded time as crashed, naming the node, on
the CI's real two-node cluster: a node whose slurmd is down (its task cannot start), and a node that
never reaches torchrun's rendezvous (the others give up after its join timeout)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.runners import nodes
from orchestrator.runners.slurm import node_names
from tests.slurm.cluster import started_cluster

SRUN_AFTER_A_TIMEOUT = """[rank0]: torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError
srun: error: vm-1: task 0: Exited with exit code 1
srun: error: vm-2: task 1: Killed
"""


def test_the_node_at_fault_is_named_not_the_first_to_give_up():
    assert nodes.failed_node(SRUN_AFTER_A_TIMEOUT)[0] == "vm-2"
    assert nodes.failed_node(SRUN_AFTER_A_TIMEOUT.replace("RendezvousTimeoutError", "ValueError"))[0] == "vm-1"
    launch = ("srun: error: Task launch for StepId=12.0 failed on node vm-2: Socket timed out on send/recv operation\n"
              "srun: error: Application launch failed: Socket timed out on send/recv operation\n")
    assert nodes.failed_node(launch) == ("vm-2", "node vm-2 (its task could not be started: Socket timed out on"
                                                 " send/recv operation)")


def _two_nodes() -> list[str]:
    found = node_names()
    if len(found) < 2:
        pytest.skip(f"the Slurm cluster has {len(found)} node(s); a seed across nodes needs 2")
    return found


def _run_one_seed(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, env: str) -> tuple[dict, float]:
    profiles = tmp_path / "seeds.yaml"
    profiles.write_text("workloads:\n  fakebench:\n    qualify: {seeds: '1', timeout_minutes: 2, dataset: {source:"
                        f" synthetic}}, env: {{{env}}}}}\n")
    monkeypatch.setenv("MLTRAIN_SEEDS_FILE", str(profiles))
    results = tmp_path / "results"
    started = time.monotonic()
    r = cli("run", "fakebench", "--runner", "slurm", "--nodes", "2", "--results", str(results), "--json")
    took = time.monotonic() - started
    assert r.code == 3, r.err  # an infrastructure fault kept the seed from being measured
    return json.loads(next(results.glob("*/seeds/1/run.json")).read_text()), took


@pytest.fixture
def second_slurmd_stopped(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The second node's slurmd stopped (SIGSTOP, by its PID: it answers nothing), on a cluster of this
    test's own, stopped whole afterwards: the controller lets the failed job go from the node only on
    its next retry, minutes later, a wait the shared cluster's next tests would have to make."""
    if not shutil.which("slurmctld"):
        pytest.skip("Slurm is not installed")
    with started_cluster() as conf:
        monkeypatch.setenv("SLURM_CONF", conf)
        name = _two_nodes()[1]
        pid = int((Path(conf).parent / f"slurmd-{name}.pid").read_text())
        os.kill(pid, signal.SIGSTOP)
        try:
            yield name
        finally:
            os.kill(pid, signal.SIGCONT)  # so that the cluster's stop (SIGTERM) ends it


@pytest.mark.slurm
def test_a_node_whose_slurmd_is_stopped_crashes_the_seed_naming_it(
        cli, second_slurmd_stopped: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    record, took = _run_one_seed(cli, tmp_path, monkeypatch, "FAKE_SLEEP_S: '0.1'")
    assert record["status"] == "crashed", record["reason"]
    assert f"node {second_slurmd_stopped} (its task could not be started" in record["reason"], record["reason"]
    assert took < 60, f"the seed took {took:.0f} s to end"


@pytest.mark.slurm
def test_a_node_that_never_joins_the_rendezvous_crashes_the_seed_naming_it(
        cli, slurm_env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    hung = _two_nodes()[1]
    record, took = _run_one_seed(cli, tmp_path, monkeypatch, "FAKE_HANG_NODE_RANK: '1', RDZV_TIMEOUT_S: '10'")
    assert record["status"] == "crashed", record["reason"]
    assert f"node {hung} (task 1: did not join the rendezvous in time" in record["reason"], record["reason"]
    assert took < 60, f"the seed took {took:.0f} s to end"
