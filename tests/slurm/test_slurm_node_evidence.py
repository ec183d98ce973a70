"""Each node of a seed across nodes samples itself (`insight.node_telemetry`) and is judged on its own
series: the seed's ranks (on the CI's cluster both nodes share one host) are the seed's own on every
node, a real other process is another's work on the node it runs on, and the seed's verdict names it."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from orchestrator.insight import quiet
from orchestrator.insight.telemetry import load_node_series
from orchestrator.results.records import HostCause, QuietHost, RunRecord, RunStatus
from orchestrator.results.run_record import NodeFacts, Placement
from orchestrator.runners.slurm import node_names
from orchestrator.session.loop import with_host_facts
from tests.hardware.test_telemetry import series


def _two_nodes() -> list[str]:
    found = node_names()
    if len(found) < 2:
        pytest.skip(f"the Slurm cluster has {len(found)} node(s); a seed across nodes needs 2")
    return found


def test_the_seeds_verdict_is_its_nodes_each_named():
    quiet_one = QuietHost(verdict="quiet", reason="quiet: other processes 1% of the host's CPU", samples=9,
                          measured={"other_cpu_pct": 1.0})
    busy = QuietHost(verdict="disturbed", reason="disturbed: ...", samples=8, measured={"other_cpu_pct": 40.0},
                     causes=(HostCause(cause="other_processes", share=0.9, mean=40.0,
                                       sentence="the host ran other work"),))
    both = quiet.judge_nodes({"n1": quiet_one, "n2": busy})
    assert both.verdict == "disturbed" and both.samples == 8 and both.measured == {"other_cpu_pct": 40.0}
    assert [(c.node, c.sentence) for c in both.causes] == [("n2", "node n2: the host ran other work")]
    assert quiet.judge_nodes({"n1": quiet_one, "n2": quiet_one}).reason.startswith("quiet on every node (2): node n1: ")
    missing = quiet.judge_nodes({"n1": quiet_one, "n2": quiet.unknown("the node wrote no series")})
    assert missing.verdict == "unknown"
    assert missing.reason == "not judged on every node: node n2: the node wrote no series"
    assert quiet.judge_nodes({}).verdict == "unknown"


def test_the_seeds_energy_is_its_nodes_summed_never_the_submitting_hosts(tmp_path: Path):
    placement = Placement(nodes=tuple(NodeFacts(name=n, node_rank=k, processes=1) for k, n in enumerate(("n1", "n2"))),
                          world_size=2, backend="nccl", rendezvous="n1:29500")
    record = RunRecord(status=RunStatus.CRASHED, reason="node n2 failed", run_start_ms=1000, run_stop_ms=9000,
                       placement=placement)
    for name, watts in (("n1", 250.0), ("n2", 150.0)):
        (tmp_path / f"{name}.json").write_text(json.dumps(series([watts] * 11)))
    host = series([5000.0] * 11)
    nodes = load_node_series(tmp_path, record.node_names)
    done = with_host_facts(record, host, nodes)
    assert done.energy is not None and done.energy.joules == pytest.approx((500 + 300) * 8.0)
    assert done.energy.method == "integrated power, summed over 2 nodes"
    assert [n.quiet_host is not None for n in done.placement.nodes] == [True, True]
    (tmp_path / "n2.json").unlink()  # n2's task never ended on its own: no partial sum
    gone = with_host_facts(record, host, load_node_series(tmp_path, record.node_names)).energy
    assert gone is not None and gone.joules is None and gone.method.startswith("unknown on 1 of 2 nodes: node n2: ")
    here = with_host_facts(record.model_copy(update={"placement": None}), host, {}).energy  # a seed run here
    assert here is not None and here.joules == pytest.approx(10000 * 8.0)


def _ranks(results: Path) -> dict[str, str]:
    """NODE_RANK -> the run mark of each of the seed's training processes running now."""
    found = {}
    for process in psutil.process_iter(["cmdline"]):
        try:
            env = process.environ()
        except (psutil.Error, OSError):
            continue
        if str(results) in env.get("RESULTS_DIR", "") and "fake_train.py" in " ".join(process.info["cmdline"] or []):
            found[env.get("NODE_RANK", "?")] = env.get("MLTRAIN_RUN_ID", "")
    return found


@pytest.mark.cpu_hog
@pytest.mark.slurm
def test_each_node_is_judged_on_its_own_the_seeds_ranks_are_its_own_a_busy_process_is_not(
        cli_process, slurm_env, tmp_path: Path):
    names = _two_nodes()[:2]
    profiles = tmp_path / "seeds.yaml"  # seed 1: 7 epochs of 1 s, each rank busy on a CPU all along
    profiles.write_text("workloads:\n  fakebench:\n    qualify: {seeds: '1', timeout_minutes: 3, dataset: {source:"
                        " synthetic}, env: {FAKE_SLEEP_S: '1', FAKE_EPOCH_MS: '1000', FAKE_BASE_EPOCHS: '0',"
                        " FAKE_SPIN: '1'}}\n")
    results = tmp_path / "results"
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])  # someone else's work, on every node
    try:
        child = cli_process("run", "fakebench", "--runner", "slurm", "--nodes", "2", "--results", str(results),
                            "--json", extra_env={"MLTRAIN_SEEDS_FILE": str(profiles)})
        deadline, ranks = time.monotonic() + 90, {}
        while len(ranks) < 2 and child.poll() is None and time.monotonic() < deadline:
            ranks = _ranks(results / "")
            time.sleep(0.2)
        _, err = child.communicate(timeout=180)
    finally:
        busy.kill()
        busy.wait()
    assert child.returncode == 1, err  # one converged seed: too few for the profile's olympic score
    (seed,) = results.glob("*/seeds/1")
    run_id = seed.parent.parent.name
    # both nodes' ranks carry the run's mark: each node's sampler counts them (and the other node's,
    # on this one host) as the seed's own, never as another's work
    assert ranks == {"0": run_id, "1": run_id}, ranks
    record = json.loads((seed / "run.json").read_text())
    assert record["status"] == "converged", record["reason"]
    verdict = record["quiet_host"]
    assert verdict["verdict"] == "disturbed", verdict["reason"]
    per_node = {n["name"]: n["quiet_host"] for n in record["placement"]["nodes"]}
    assert sorted(per_node) == names
    for name in names:
        assert per_node[name]["verdict"] == "disturbed" and per_node[name]["samples"] >= 3, per_node[name]
        assert "other_processes" in {c["cause"] for c in per_node[name]["causes"]}
        assert any(c["node"] == name and c["cause"] == "other_processes" for c in verdict["causes"])
        assert f"node {name}: the host ran other work" in verdict["reason"]
        written = json.loads((seed / "nodes" / f"{name}.json").read_text())
        assert f"marked MLTRAIN_RUN_ID={run_id}" in written["evidence_notes"]["own_processes"]
    # no NVML on these nodes: the seed's energy is unknown on each, never the submitting host's
    assert record["energy"]["joules"] is None
    assert record["energy"]["method"].startswith(f"unknown on 2 of 2 nodes: node {names[0]}: no GPU power: ")


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM])
def test_a_launcher_ended_by_a_signal_ends_its_sampler_by_that_signal(tmp_path: Path, signum: int):
    ended = subprocess.run([sys.executable, "-m", "orchestrator.insight.node_telemetry", str(tmp_path / "nodes"), "--",
                            "sh", "-c", f"kill -{int(signum)} $$"], capture_output=True, text=True, timeout=60)
    assert ended.returncode == -signum, ended.stderr  # as srun would have seen the launcher end: Killed, not exit 1
    assert "Traceback" not in ended.stderr
