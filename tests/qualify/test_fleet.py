"""The fleet: one exclusive Slurm job per node, gathered into the fleet table; a node slower than
its peers by more than k MADs is flagged even without references."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.qualify.config import FleetPolicy
from orchestrator.qualify.fleet import fleet_rows
from orchestrator.results.qualification import Status
from orchestrator.runners.slurm import SlurmOptions
from tests.qualify.test_outputs import make_record

POLICY = FleetPolicy(k_mad=3.0, floor_pct=3.0)


def test_a_node_slower_than_its_peers_is_flagged_without_references():
    rates = {"n1": 100.0, "n2": 101.0, "n3": 99.0, "n4": 100.5, "n5": 80.0}
    records = {node: make_record(rate, node=node) for node, rate in rates.items()}
    rows = {r.node: r for r in fleet_rows(list(rates), records, {}, POLICY)}
    slow = rows["n5"]
    assert slow.flagged and slow.verdict is Status.PASS  # its own verdict stands; the fleet says it is slow
    assert slow.worst_metric == "throughput_samples_per_s" and slow.worst_vs_fleet_pct == -20.0
    assert slow.reason.startswith("throughput_samples_per_s 80 samples/s is 20.0% worse than the fleet median 100"
                                  " of 5 2 CPUs Test CPU nodes (> 3 MADs)")
    assert not any(rows[n].flagged for n in ("n1", "n2", "n3", "n4"))


def test_too_few_peers_flag_nobody_and_a_missing_record_is_could_not_run():
    records = {"n1": make_record(100.0, node="n1"), "n2": make_record(50.0, node="n2")}
    rows = fleet_rows(["n1", "n2", "n3"], records, {"n3": "slurm job 7 (NODE_FAIL) wrote no record"}, POLICY)
    assert [r.flagged for r in rows] == [False, False, False]
    assert rows[1].worst_vs_fleet_pct == pytest.approx(-33.33, abs=0.01)
    assert "too few peers to compare" in rows[0].reason
    assert rows[2].verdict is Status.INCONCLUSIVE and rows[2].reason == "slurm job 7 (NODE_FAIL) wrote no record"


def test_the_batch_script_pins_one_node_exclusively():
    from orchestrator.config.workloads import load_workload
    from orchestrator.runners.base import JobSpec
    from orchestrator.runners.slurm import batch_script
    from tests.conftest import TEST_WORKLOADS

    workload = load_workload(TEST_WORKLOADS / "fakebench")
    job = JobSpec(kind="node", name="node-gpu07", run_id="q", bundle=workload, data_dir=Path("/d"), folder=Path("/r"),
                  env={}, command=("python", "-m", "orchestrator.cli", "qualify", "order", "/r/order.json"))
    script = batch_script(job, SlurmOptions(nodelist="gpu07", exclusive=True), project_root=Path("/repo"),
                          output=Path("/r/out"))
    assert "#SBATCH --nodelist=gpu07\n#SBATCH --exclusive\n" in script
    assert script.rstrip().endswith("-m orchestrator.cli qualify order /r/order.json")
    with pytest.raises(Exception, match="node list 'gpu07;reboot'"):
        SlurmOptions(nodelist="gpu07;reboot")


@pytest.mark.slurm
def test_the_fleet_on_the_real_slurm_gathers_the_nodes_verdict(cli, slurm_env, tmp_path: Path):
    junit = tmp_path / "fleet.xml"
    r = cli("qualify", "--runner", "slurm", "--nodes", "all", "--suite", "quick", "--results",
            str(tmp_path / "r"), "--junit", str(junit))
    from orchestrator.runners.slurm import node_names

    names = node_names()
    assert r.code == 0, r.err
    text = " ".join(r.out.split())
    assert f"fleet · quick · {len(names)} node(s)" in text and "fleet verdict: PASS (exit 0)" in text
    if len(names) > 1:  # the CI's two nodes all-reduce with each other (gloo), node against node
        assert "nccl_pairs: PASS" in text and f"pair {names[0]}-{names[1]}: slurm jobs" in r.err
    assert "slurm job" in r.err and "submitted" in r.err
    r = cli("qualify", "--runner", "slurm", "--nodes", "all", "--suite", "throughput_only", "--results",
            str(tmp_path / "r"), "--json")
    fleet = json.loads(r.out)
    rows, nodes = fleet["fleet"]["rows"], fleet["nodes"]
    assert [row["node"] for row in rows] == [node["node"] for node in nodes] == names
    assert all(row["verdict"] == "pass" and row["qualification_id"] for row in rows)
    assert all(node["runner"] == "local" for node in nodes)  # each node qualified itself, where it runs
    assert "<testcase" in junit.read_text()
    history = json.loads(cli("qualify", "history", "--results", str(tmp_path / "r"), "--json").out)
    assert len(history) == 2 * len(names)  # every node record of both fleets is in the store
