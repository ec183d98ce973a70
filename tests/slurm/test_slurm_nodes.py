"""One seed across nodes (`mltrain run --runner slurm --nodes N`): the batch script, the facts and the
failed node read back, and real runs on the CI's two-node cluster (torchrun's c10d rendezvous on the
first node, one launcher per node through srun; one node's launcher killed mid-seed)."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from orchestrator.config.workloads import load_workload
from orchestrator.results.paths import SeedPaths
from orchestrator.runners import node_launch, nodes
from orchestrator.runners.node_container import CONTAINER_LINE
from orchestrator.runners.node_launch import NODE_LINE
from orchestrator.runners.slurm import SlurmOptions, batch_script, node_names
from orchestrator.session.seed import seed_spec

TESTS = Path(__file__).resolve().parents[1]


def _script(options: SlurmOptions) -> str:
    workload = load_workload(TESTS / "workloads" / "fakebench")
    job = seed_spec(run_id="fakebench-qualify-1", seed=7, workload=workload, data_dir=Path("/data/fake"),
                    paths=SeedPaths(Path("/results/run/seeds/7")), env={})
    return batch_script(job, options, project_root=Path("/repo"), output=job.paths.slurm_output)


def test_a_seed_on_two_nodes_is_one_job_with_one_launcher_per_node():
    script = _script(SlurmOptions(nodes=2, gpus_per_node=4))
    assert "#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=1\n" in script and "#SBATCH --gres=gpu:4\n" in script
    assert "export NNODES=2 NPROC=4 " in script
    assert f":$(python -c {shlex.quote(nodes.FREE_PORT)})\"\n" in script  # a port free on the first node
    assert ("exec srun --kill-on-bad-exit=1 --nodes=2 --ntasks-per-node=1 python -m orchestrator.insight.node_telemetry"
            " /results/run/seeds/7/nodes -- python -m orchestrator.runners.node_launch bash run_and_time.sh 7"
            ) in script.replace(f"{TESTS}/workloads/fakebench/", "")
    assert "export MLTRAIN_RUN_ID=fakebench-qualify-1\n" in script  # each node tells the seed's processes by it
    one = _script(SlurmOptions())
    assert "#SBATCH --nodes=1\n#SBATCH --ntasks=1\n" in one and "srun" not in one and "NNODES" not in one
    assert "exec python -m orchestrator.insight.node_telemetry /results/run/seeds/7/nodes -- bash " in one


@pytest.mark.parametrize(("given", "message"), [
    (["--nodes", "0"], "--nodes 0: give the nodes of one seed, a whole number >= 1"),
    (["--nodes", "2", "--runner", "local"], "--nodes is for the slurm or slurm-docker runner"),
    (["--gpus-per-node", "2", "--runner", "local"], "--gpus-per-node is for the slurm or slurm-docker runner"),
])
def test_bad_node_options_are_one_line_errors(cli, tmp_path: Path, given, message):
    r = cli("run", "fakebench", "--seeds", "1", "--results", str(tmp_path / "r"), *given)
    assert r.code == 2 and message in r.err and r.err.count("\n") == 1, r.err
    assert not (tmp_path / "r").exists()


def test_the_first_node_srun_saw_fail_is_named():
    text = ("fakebench: seed 1\nsrun: error: vm-2: task 1: Exited with exit code 137\n"
            "srun: error: vm-1: task 0: Terminated\n")
    assert nodes.failed_node(text) == ("vm-2", "node vm-2 (task 1: Exited with exit code 137)")
    assert nodes.failed_node("srun: Job step aborted\n") == ("", "")


def test_the_placement_is_read_from_each_nodes_facts(tmp_path: Path):
    log = tmp_path / "output.log"
    facts = [{"name": f"n{i}", "node_rank": i, "processes": 2, "gpus": 2, "interfaces": {"ib0": ["10.0.0.1"]},
              "ib_devices": ["mlx5_0"], "rendezvous": "10.0.0.1:29401", "socket_ifname": None} for i in (1, 0)]
    ran = {"node": "n1", "name": "mltrain-r-seed7-n1", "container": "mltrain/w:1@sha256:ab"}
    log.write_text("".join(NODE_LINE + json.dumps(f) + "\n" for f in facts) + f"{NODE_LINE}{{broken\n"
                   + CONTAINER_LINE + json.dumps(ran) + f"\n{CONTAINER_LINE}[]\n")
    placement = nodes.placement_of(log)
    assert placement is not None and [n.name for n in placement.nodes] == ["n0", "n1"]
    assert [n.container for n in placement.nodes] == [None, "mltrain/w:1@sha256:ab"]  # n1 said its container
    assert placement.world_size == 4 and placement.backend == "nccl" and placement.rendezvous == "10.0.0.1:29401"
    assert placement.nodes[0].ib_devices == ("mlx5_0",)
    log.write_text(":::MLLOG {}\n")
    assert nodes.placement_of(log) is None


def test_a_node_says_its_infiniband_devices_where_it_has_them(tmp_path: Path):
    for name in ("mlx5_1", "mlx5_0"):
        (tmp_path / name).mkdir()
    assert node_launch.ib_devices(tmp_path) == ["mlx5_0", "mlx5_1"]
    assert node_launch.ib_devices(tmp_path / "absent") == []  # no InfiniBand: none, not an error
    said = node_launch.facts({"SLURMD_NODENAME": "vm-2", "SLURM_NODEID": "1", "NPROC": "4", "NNODES": "2",
                              "CUDA_VISIBLE_DEVICES": "0,1,2,3", "NCCL_SOCKET_IFNAME": "ib0",
                              "RDZV_ENDPOINT": "vm-1:29411"})
    assert {k: said[k] for k in ("name", "node_rank", "processes", "gpus", "socket_ifname", "rendezvous")} == {
        "name": "vm-2", "node_rank": 1, "processes": 4, "gpus": 4, "socket_ifname": "ib0", "rendezvous": "vm-1:29411"}
    assert "lo" in said["interfaces"]


@pytest.mark.parametrize("workload", ["unet3d", "resnet50", "llama31_8b"])
def test_each_workloads_seed_joins_the_nodes_through_torchrun_rendezvous(workload: str, tmp_path: Path):
    """What a node's launcher runs (`runners.node_launch` -> run_and_time.sh with NNODES, NODE_RANK and
    RDZV_ENDPOINT): each workload's trainer under torchrun's c10d rendezvous, node 0 its host."""
    python = tmp_path / "python"  # the interpreter the script would start, saying what it was given
    python.write_text('#!/bin/sh\necho "started: $*"\n')
    python.chmod(0o755)
    script = TESTS.parent / "workloads" / workload / "run_and_time.sh"
    for rank, host in (("0", "1"), ("1", "0")):
        env = {**os.environ, "PYTHON": str(python), "NNODES": "2", "NODE_RANK": rank, "NPROC": "2",
               "RDZV_ENDPOINT": "vm-1:29411", "RDZV_ID": "17", "DATADIR": str(tmp_path), "RESULTS_DIR": str(tmp_path)}
        done = subprocess.run(["bash", str(script), "7"], env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        (line,) = [x for x in done.stdout.splitlines() if x.startswith("started: ")]
        assert line.startswith("started: -m torch.distributed.run --nnodes 2 --nproc_per_node 2 --rdzv_backend c10d"
                               f" --rdzv_endpoint vm-1:29411 --rdzv_id 17 --rdzv_conf is_host={host} -m workloads."
                               f"{workload}.train "), line
        assert line.endswith(" 7") or " --seed 7 " in f"{line} ", line


def _two_nodes() -> list[str]:
    found = node_names()
    if len(found) < 2:
        pytest.skip(f"the Slurm cluster has {len(found)} node(s); a seed across nodes needs 2")
    return found


@pytest.mark.slurm
def test_seeds_across_two_nodes_converge_with_world_size_two(cli, slurm_env, tmp_path: Path):
    names = _two_nodes()
    results = str(tmp_path / "s")
    r = cli("run", "fakebench", "--seeds", "1-2", "--runner", "slurm", "--nodes", "2", "--results", results,
            "--label", "two-nodes", "--json")
    assert r.code == 1, r.err  # two seeds converged: too few for the profile's olympic score, as on one node
    local = json.loads(cli("run", "fakebench", "--seeds", "1-2", "--results", results, "--label", "one-node",
                           "--json").out)
    assert json.loads(r.out)["per_seed"] == local["per_seed"]  # one MLLOG log per seed: rank 0's
    for seed in (1, 2):
        (record,) = [json.loads(p.read_text()) for p in (tmp_path / "s").glob(f"*/seeds/{seed}/run.json")
                     if (p.parent / "slurm-job.sh").exists()]
        placement = record["placement"]
        assert [n["name"] for n in placement["nodes"]] == names[:2] and placement["world_size"] == 2
        assert placement["backend"] == "gloo" and placement["rendezvous"].endswith(tuple("0123456789"))
        assert all(n["interfaces"] for n in placement["nodes"])
        output = next((tmp_path / "s").glob(f"*/seeds/{seed}/slurm-job.sh")).with_name("output.log").read_text()
        assert output.count("fakebench: rank ") == 2 and output.count('"key": "run_start"') == 1
    # the same workload on 1 and 2 nodes: its scaling efficiency (fakebench's epochs take as long on 2 nodes)
    r = cli("compare", "--label", "one-node", "--label", "two-nodes", "--results", results)
    assert r.code == 0, r.err
    line = " ".join(r.out.split())
    assert line.count("scaling: ") == 1, line
    assert "on 2 nodes (world size 2) runs an epoch in 1 s against 1 s on 1 node(s)" in line, line
    assert "speedup 1.00x of an ideal 2x, scaling efficiency 50.0%" in line, line
    facts = json.loads(cli("compare", "--label", "one-node", "--label", "two-nodes", "--results", results,
                           "--json").out)["facts"]  # the node count tells the setups apart
    assert [facts[s][f] for s, f in (("one-node", "nodes"), ("two-nodes", "nodes"), ("two-nodes", "world size"))] \
        == ["1", "2", "2"], facts


def _launcher_of(node_rank: int, results: Path) -> psutil.Process | None:
    for process in psutil.process_iter(["cmdline"]):
        try:
            env = process.environ()
        except (psutil.Error, OSError):
            continue
        if (env.get("NODE_RANK") == str(node_rank) and str(results) in env.get("RESULTS_DIR", "")
                and "torch.distributed.run" in " ".join(process.info["cmdline"] or [])):
            return process
    return None


@pytest.mark.slurm
def test_a_node_killed_mid_seed_ends_that_seed_naming_it_and_the_next_runs(
        cli, cli_process, slurm_env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    names = _two_nodes()
    profiles = tmp_path / "seeds.yaml"
    profiles.write_text("workloads:\n  fakebench:\n    qualify: {seeds: '1-2', timeout_minutes: 3,"
                        " dataset: {source: synthetic}, env: {FAKE_SLEEP_S: '0.3'}}\n")
    results = tmp_path / "results"
    child = cli_process("run", "fakebench", "--runner", "slurm", "--nodes", "2", "--results", str(results),
                        "--json", extra_env={"MLTRAIN_SEEDS_FILE": str(profiles)})
    deadline = time.monotonic() + 90
    while (launcher := _launcher_of(1, results / "")) is None or not list(results.glob("*/seeds/1/output.log")):
        assert time.monotonic() < deadline and child.poll() is None, "node 1's launcher never ran"
        time.sleep(0.2)
    time.sleep(1.0)  # mid-seed: the ranks have met and train
    killed = time.monotonic()
    os.kill(launcher.pid, signal.SIGKILL)
    while not list(results.glob("*/seeds/1/run.json")):
        assert time.monotonic() - killed < 120, "seed 1 did not end within 2 minutes of its node's loss"
        time.sleep(0.2)
    ended_in = time.monotonic() - killed
    out, err = child.communicate(timeout=120)
    assert child.returncode == 3, err
    seeds = json.loads(out)["per_seed"]
    # its launcher SIGKILLed: one node of the seed failed, so the seed crashed there (an infrastructure fault)
    assert seeds["1"]["status"] == "crashed" and seeds["2"]["status"] == "converged"
    record = json.loads(next(results.glob("*/seeds/1/run.json")).read_text())
    assert f"node {names[1]} (task 1" in record["reason"], record["reason"]
    assert ended_in < 120
    run_id = next(p.parent.name for p in results.glob("*/manifest.json"))
    listed = json.loads(cli("show", run_id, "--results", str(results), "--json").out)
    assert sorted(listed["records"]) == ["1", "2"]  # the store lists every seed
    monkeypatch.setenv("MLTRAIN_SEEDS_FILE", str(profiles))
    r = cli("run", "fakebench", "--resume", run_id, "--nodes", "1", "--results", str(results))
    assert r.code == 2 and "ran its seeds on 2 node(s): resume it so (drop --nodes or give --nodes 2)" in r.err
    r = cli("run", "fakebench", "--resume", run_id, "--retry-failed", "--results", str(results), "--json")
    assert r.code == 1, r.err  # both seeds converged now: too few for the profile's olympic score
    assert json.loads(r.out)["per_seed"]["1"]["status"] == "converged"  # again on both nodes, as the run ran
    (again,) = results.glob("*/seeds/1/run.json")
    assert len(json.loads(again.read_text())["placement"]["nodes"]) == 2


def test_under_slurm_docker_each_node_runs_the_seeds_container_on_one_node_too():
    workload = load_workload(TESTS / "workloads" / "fakebench")
    job = seed_spec(run_id="fakebench-qualify-1", seed=7, workload=workload, data_dir=Path("/data/fake"),
                    paths=SeedPaths(Path("/results/run/seeds/7")), env={})
    for count in (1, 2):
        script = batch_script(job, SlurmOptions(nodes=count), project_root=Path("/repo"),
                              output=job.paths.slurm_output, container=job.paths.container_spec)
        assert (f"\nsrun --kill-on-bad-exit=1 --nodes={count} --ntasks-per-node=1 python -m"
                " orchestrator.insight.node_telemetry /results/run/seeds/7/nodes -- python -m"
                " orchestrator.runners.node_launch python -m orchestrator.runners.node_container"
                " /results/run/seeds/7/container.json || status=$?\n"
                f"srun --nodes={count} --ntasks-per-node=1 --quiet python -m orchestrator.runners.node_container"
                ' --remove /results/run/seeds/7/container.json || true\nexit "$status"\n') in script, script
        assert f"export NNODES={count} NPROC=1 " in script and "run_and_time.sh" not in script


def test_nodes_without_the_image_are_named_in_one_line():
    from orchestrator.errors import RunnerError, UsageError
    from orchestrator.runners.slurm_docker import missing_said

    said = missing_said("mltrain/x:1", {"n2": ""}, ["n1", "n2"])
    assert isinstance(said, UsageError) and str(said).startswith("image mltrain/x:1 is not on node n2 (of n1, n2): ")
    said = missing_said("mltrain/x:1", {"n1": "", "n2": "", "n3": "no engine"}, ["n1", "n2", "n3"])
    assert isinstance(said, UsageError) and "is not on nodes n1, n2 (of n1, n2, n3)" in str(said)
    said = missing_said("mltrain/x:1", {"n3": "cannot reach the Docker engine"}, ["n1", "n3"])
    assert isinstance(said, RunnerError) and str(said) == (
        "node n3 cannot say whether it holds image mltrain/x:1: cannot reach the Docker engine")
    assert "\n" not in str(said)
