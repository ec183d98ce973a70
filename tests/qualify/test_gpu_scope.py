"""Which GPUs `mltrain qualify` qualifies (issue 18): on a node whose NVML sees GPUs it uses them by
default on every runner; a check that ran on the CPU of a GPU node fails; `--gpus none` says the GPUs
were not qualified. A stand-in NVML makes this CPU machine a 2 x H100 node; a stand-in probe sees it
as CUDA would (CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER included)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from orchestrator.errors import EXIT_INFRASTRUCTURE, EXIT_INVALID_RESULT, EXIT_OK
from orchestrator.insight import gpus as nvml_access
from orchestrator.qualify.catalog import default_registry
from orchestrator.qualify.config import QUALIFY_FILE_ENV
from tests.qualify.nodes import H100, FakeNvml, cuda_probe_source, node_trace, stand_in_config

RATES = {"gemm_fp32_256x256x256": 30.0}


@pytest.fixture
def node(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """Make this machine a GPU node of ``trace`` whose probe is the stand-in script ``source`` (None: the real
    probe)."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)

    def make(trace: dict, source: str | None = None) -> None:
        monkeypatch.setattr(nvml_access, "load_nvml", lambda: FakeNvml(trace))
        if source is not None:
            monkeypatch.setenv(QUALIFY_FILE_ENV, str(stand_in_config(tmp_path / "stand-in", source)))

    return make


def qualify(cli, tmp_path: Path, *extra: str):
    return cli("qualify", "--suite", "quick", "--results", str(tmp_path / "r"), "--node-name", "n1", *extra)


def test_qualify_quick_fails_a_node_whose_gpu1_fell_off_the_bus(cli, node, tmp_path: Path):
    """The issue's node: GPU 1 answers every NVML query with "GPU is lost" (Xid 79); CUDA has GPU 0 only."""
    trace = node_trace([H100, H100], faults={1: {"error": "GpuIsLost", "at": "queries"}})
    node(trace, cuda_probe_source(trace, RATES, usable=[0]))
    r = qualify(cli, tmp_path)
    text = " ".join(r.out.split())
    assert r.code == EXIT_INVALID_RESULT and "verdict: FAIL (exit 1)" in text, text
    assert "gpu_health: GPU1: cannot be read through NVML: GPU is lost (fell off the bus" in text
    assert "NVML sees 2 GPUs but CUDA sees 1" in text


def test_qualify_uses_the_nodes_gpus_by_default(cli, node, tmp_path: Path):
    trace = node_trace([H100, H100])
    node(trace, cuda_probe_source(trace, RATES))
    r = qualify(cli, tmp_path, "--json")
    record = json.loads(r.out)
    assert record["system"]["probe"]["device"] == "cuda" and record["system"]["probe"]["gpu_count"] == 2, r.err
    assert record["verdict"] == "pass" and r.code == EXIT_OK
    assert record["system"]["gpu_scope"]["cuda_to_nvml"] == {"cuda:0": "GPU0 (00000000:18:00.0)",
                                                             "cuda:1": "GPU1 (00000000:28:00.0)"}


def test_the_cpu_of_a_gpu_node_is_not_qualified_in_its_place(cli, node, tmp_path: Path):
    """The real probe on this CPU machine, NVML seeing two H100s: CUDA cannot use them (this torch has no
    CUDA at all). The GEMM that "passed" on the CPU and the NCCL "skipped" on it fail."""
    node(node_trace([H100, H100]))
    r = qualify(cli, tmp_path, "--json")
    record = json.loads(r.out)
    assert record["verdict"] == "fail" and r.code == EXIT_INVALID_RESULT, r.err
    checks = {c["name"]: c for c in record["checks"]}
    health = " | ".join(checks["gpu_health"]["reasons"])
    assert "NVML sees 2 GPUs but CUDA sees 0: CUDA cannot use GPU0 (00000000:18:00.0), GPU1 (00000000:28:00.0)" \
        in health, health
    assert "Torch not compiled with CUDA enabled" in health
    bound = [d.name for d in default_registry().declarations if d.device_bound and d.name in checks]
    assert {"gemm", "nccl", "throughput"} <= set(bound)
    for name in bound:  # every check whose numbers are the device's, as its declaration says
        assert checks[name]["status"] == "fail", name
        assert checks[name]["reasons"][0].startswith("ran on the CPU, not on the node's 2 GPUs"), name
    assert checks["storage"]["status"] != "fail"  # reading the dataset is not the GPUs' business


def test_gpus_none_on_a_gpu_node_says_the_gpus_were_not_qualified(cli, node, tmp_path: Path):
    trace = node_trace([H100, H100])
    node(trace, cuda_probe_source(trace, RATES))
    r = qualify(cli, tmp_path, "--gpus", "none", "--json")
    record = json.loads(r.out)
    assert record["system"]["probe"]["device"] == "cpu"  # the operator's explicit choice still holds
    assert record["verdict"] == "warn", record["reasons"]
    assert record["reasons"][0] == ("gpu_health: GPUs not qualified: --gpus none ran the checks on the CPU; NVML"
                                    " sees 2 GPU(s) (GPU0 (00000000:18:00.0), GPU1 (00000000:28:00.0)), read for"
                                    " health only")


def test_docker_qualification_asks_the_engine_for_every_gpu_by_default(cli, node, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch):
    from orchestrator.errors import RunnerError
    from orchestrator.runners.docker.runner import DockerRunner

    asked: list[str] = []

    def prepare(self: DockerRunner, workload: object) -> dict:
        asked.append(self.gpus.spec)
        raise RunnerError("no engine in this test")

    monkeypatch.setattr(DockerRunner, "prepare", prepare)
    node(node_trace([H100, H100]))
    assert qualify(cli, tmp_path, "--runner", "docker").code == EXIT_INFRASTRUCTURE
    node(node_trace([]))  # declared a CPU node: its history's two GPUs would FAIL it (they are not found)
    assert qualify(cli, tmp_path, "--runner", "docker", "--expect-gpus", "0").code == EXIT_INFRASTRUCTURE
    assert asked == ["all", "none"]  # a node whose NVML sees GPUs hands them all to the container


class FakeSlurm:
    """Answers the Slurm commands of a fleet qualification; keeps each batch script sbatch got."""

    def __init__(self, gres: str) -> None:
        self.gres = gres
        self.scripts: list[str] = []

    def __call__(self, args: list[str]) -> subprocess.CompletedProcess[str]:
        out = ""
        if args[:3] == ["scontrol", "show", "hostnames"]:
            out = args[3].replace(",", "\n")
        elif args[:3] == ["scontrol", "show", "node"]:
            out = f"NodeName={args[-1]} Arch=x86_64 CPUTot=64 Gres={self.gres} State=IDLE"
        elif args[0] == "sbatch":
            self.scripts.append(Path(args[-1]).read_text())
            out = "4242"
        elif args[:3] == ["scontrol", "show", "job"]:
            out = "JobId=4242 JobState=COMPLETED ExitCode=0:0"
        return subprocess.CompletedProcess(args, 0, out, "")


@pytest.mark.parametrize(("gres", "gpus", "asked", "node_args"), [
    ("gpu:h100:8(S:0-1)", None, "#SBATCH --gres=gpu:8\n", False),
    ("gpu:a100:4(S:0),gpu:h100:4(S:1)", None, "#SBATCH --gres=gpu:8\n", False),
    ("(null)", None, "", False),
    ("gpu:h100:8(S:0-1)", "none", "export CUDA_VISIBLE_DEVICES=''\n", True),
])
def test_the_fleet_asks_slurm_for_each_nodes_gpus(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gres: str,
                                                  gpus: str | None, asked: str, node_args: bool):
    from orchestrator.runners import slurm

    fake = FakeSlurm(gres)
    monkeypatch.setattr(slurm, "_slurm", fake)
    extra = ("--gpus", gpus) if gpus else ()
    cli("qualify", "--runner", "slurm", "--nodes", "gpu01", "--results", str(tmp_path / "r"), *extra)
    (script,) = fake.scripts
    if asked:
        assert asked in script
    else:
        assert "--gres" not in script
    if gpus is None:
        assert "CUDA_VISIBLE_DEVICES" not in script  # nothing of the node's hidden from its qualification
    command = script.rstrip().splitlines()[-1]  # the node's own `mltrain qualify order FILE`
    assert command.startswith("exec ") and " -m orchestrator.cli -q qualify order " in command
    order = json.loads(Path(command.split()[-1]).read_text())  # the fleet's typed order to the node
    assert (order["gpus"] == "none") == bool(node_args)  # so that the node's verdict says its GPUs were left out


def test_the_probe_numbers_the_gpus_of_a_mixed_node_as_nvml_does(cli, node, tmp_path: Path):
    """An L4 in the first slot, an H100 in the second: CUDA's default puts the H100 first. mltrain starts the
    probe with CUDA_DEVICE_ORDER=PCI_BUS_ID, so cuda:0 is NVML's GPU0, and each per-GPU case is named by the
    GPU that made it."""
    trace = node_trace(["NVIDIA L4", H100])
    node(trace, cuda_probe_source(trace, RATES, per_gpu={0: {"gemm_bf16_8192x8192x8192": 100.0},
                                                         1: {"gemm_bf16_8192x8192x8192": 650.0}}))
    record = json.loads(qualify(cli, tmp_path, "--json").out)
    assert record["system"]["gpu_scope"]["cuda_to_nvml"] == {"cuda:0": "GPU0 (00000000:18:00.0)",
                                                             "cuda:1": "GPU1 (00000000:28:00.0)"}
    assert record["system"]["probe"]["device_name"] == "NVIDIA L4"
    gemm = {m["metric"]: m for c in record["checks"] for m in c["measurements"] if c["name"] == "gemm"}
    assert gemm["gemm_bf16_8192x8192x8192_gpu0"]["value"] == 100.0  # the L4's, whatever CUDA called it
    assert gemm["gemm_bf16_8192x8192x8192_gpu1"]["device"] == "GPU1 (00000000:28:00.0)"
