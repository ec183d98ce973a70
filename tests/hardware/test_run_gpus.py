"""`--gpus` reaches the workload (CUDA_VISIBLE_DEVICES, which NPROC=auto counts), the manifest
records it, and telemetry samples those GPUs only (issue 15, on a fake 8-GPU host)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from orchestrator.config.workloads import load_workload
from orchestrator.insight import gpus as nvml_access
from orchestrator.results.store import Store
from orchestrator.runners.base import JobSpec
from orchestrator.runners.local import LocalRunner
from orchestrator.runners.slurm import SlurmOptions, batch_script
from tests.conftest import TEST_WORKLOADS
from tests.hardware.fake_nvml import FakeNvml, eight_gpu_trace, node_trace


@pytest.mark.parametrize(
    ("inherited", "spec", "seeds_see", "sampled"),
    [
        (None, None, None, None),  # not given: what this shell sees, every GPU
        ("1,3", None, None, ("1", "3")),  # not given: CUDA_VISIBLE_DEVICES passes through
        (None, "all", None, None),
        (None, "none", "", ()),
        (None, "2", "0,1", ("0", "1")),
        ("4,5,6", "2", "4,5", ("4", "5")),  # a count: the first N of what this shell sees
        (None, "2,5", "2,5", ("2", "5")),
        (None, "device=GPU-fake-0003", "GPU-fake-0003", ("GPU-fake-0003",)),
    ],
)
def test_local_runner_sets_cuda_visible_devices_from_gpus(
    monkeypatch: pytest.MonkeyPatch, inherited: str | None, spec: str | None, seeds_see: str | None, sampled,
):
    if inherited is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", inherited)
    runner = LocalRunner(Path("."), gpus=spec)
    assert runner.gpu_env == ({} if seeds_see is None else {"CUDA_VISIBLE_DEVICES": seeds_see})
    assert runner.sampled_gpus == sampled


def test_slurm_hides_gpus_only_when_told_none():
    workload = load_workload(TEST_WORKLOADS / "fakebench")
    job = JobSpec(kind="seed", name="seed1", run_id="r", seed=1, bundle=workload, command=workload.run, args=("1",),
                  data_dir=Path("/d"), folder=Path("/r"), env={})
    script = {spec: batch_script(job, SlurmOptions(gpus=spec), project_root=Path("/p"), output=Path("/o"))
              for spec in (None, "none", "2")}
    assert "CUDA_VISIBLE_DEVICES" not in script[None] and "--gres" not in script[None]
    assert "export CUDA_VISIBLE_DEVICES=''" in script["none"] and "--gres" not in script["none"]
    assert "#SBATCH --gres=gpu:2" in script["2"] and "CUDA_VISIBLE_DEVICES" not in script["2"]


def test_docker_samples_the_devices_the_engine_hands_out():
    from orchestrator.runners.docker.runner import DockerRunner

    assert DockerRunner(Path("."), gpus="2").sampled_gpus == ("0", "1")
    assert DockerRunner(Path("."), gpus="1,3").sampled_gpus == ("1", "3")
    assert DockerRunner(Path("."), gpus="all").sampled_gpus is None
    assert DockerRunner(Path("."), gpus="none").sampled_gpus == ()


def _fakebench_that_says_what_it_sees(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A copy of the fake workload whose seeds print the CUDA_VISIBLE_DEVICES they got."""
    workloads = tmp_path / "workloads"
    shutil.copytree(TEST_WORKLOADS / "fakebench", workloads / "fakebench")
    script = workloads / "fakebench" / "run_and_time.sh"
    say = 'echo "seed sees CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES-unset}"'
    script.write_text(script.read_text().replace('cd "$(dirname "$0")"', f'cd "$(dirname "$0")"\n{say}'))
    monkeypatch.setenv("MLTRAIN_WORKLOADS", str(workloads))


def test_a_run_on_two_of_eight_gpus(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Through `mltrain run`: the seeds see GPUs 2 and 5, the manifest says so, telemetry reads those two."""
    _fakebench_that_says_what_it_sees(tmp_path, monkeypatch)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    nvml = FakeNvml(eight_gpu_trace(busy=(2, 5)))
    monkeypatch.setattr(nvml_access, "load_nvml", lambda: nvml)
    results = tmp_path / "results"
    r = cli("run", "fakebench", "--seeds", "1-3", "--gpus", "2,5", "--results", str(results))
    assert r.code == 0, r.err
    (run_id,) = [p.name for p in results.iterdir() if p.is_dir()]
    run = Store(results).open(run_id)
    provenance = run.manifest.runner_provenance
    assert provenance["gpus"] == "2,5" and provenance["cuda_visible_devices"] == "2,5"
    seed = run.paths.seed(1)
    assert "seed sees CUDA_VISIBLE_DEVICES=2,5" in seed.output.read_text()
    telemetry = json.loads(seed.telemetry.read_text())
    assert telemetry["gpu_source"]["selected"] == ["2", "5"] and len(telemetry["gpus"]) == 2
    assert set(telemetry["gpus"][0]["util_pct"]) == {95.0}


def test_no_gpus_flag_leaves_the_seeds_environment_alone(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    _fakebench_that_says_what_it_sees(tmp_path, monkeypatch)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    results = tmp_path / "results"
    assert cli("run", "fakebench", "--seeds", "1-3", "--results", str(results)).code == 0
    (run_id,) = [p.name for p in results.iterdir() if p.is_dir()]
    run = Store(results).open(run_id)
    assert "seed sees CUDA_VISIBLE_DEVICES=3" in run.paths.seed(2).output.read_text()
    assert run.manifest.runner_provenance["gpus"] is None


@pytest.mark.parametrize("at", ["handle", "queries"])
def test_a_run_on_a_node_with_a_lost_gpu_records_it_and_runs(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             at: str):
    """Issue 18: sysinfo.capture (the run manifest) and the telemetry sampler meet a GPU that fell off the
    bus: the run goes on, the manifest says which GPU and why."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    trace = node_trace(["NVIDIA H100 80GB HBM3"] * 2, faults={1: {"error": "GpuIsLost", "at": at}})
    nvml = FakeNvml(trace)
    monkeypatch.setattr(nvml_access, "load_nvml", lambda: nvml)
    results = tmp_path / "results"
    r = cli("run", "fakebench", "--seeds", "1-3", "--results", str(results))
    assert r.code == 0 and "Traceback" not in r.err, r.err
    (run_id,) = [p.name for p in results.iterdir() if p.is_dir()]
    run = Store(results).open(run_id)
    devices = run.manifest.system["gpus"]["devices"]
    assert devices[0]["name"] == "NVIDIA H100 80GB HBM3"
    assert devices[1]["available"] is False and devices[1]["reason"].startswith("GPU is lost"), devices[1]
    telemetry = json.loads(run.paths.seed(1).telemetry.read_text())
    assert list(telemetry["gpu_source"]["unavailable"]) == ["1"] and len(telemetry["gpus"]) == 1


# ---------------------------------------------------------------- CUDA_DEVICE_ORDER (issue 18)

SAY_ORDER = ("python", "-c", "import os; print('order=' + os.environ.get('CUDA_DEVICE_ORDER', 'unset'))")


def _say_order_workload():
    workload = load_workload(TEST_WORKLOADS / "fakebench")
    return workload.model_copy(update={"data": workload.data.model_copy(update={"cli": SAY_ORDER})})


def _local_job_and_dataset_command(tmp_path: Path) -> list[str]:
    runner = LocalRunner(Path("."))
    workload = _say_order_workload()
    job = runner.submit(JobSpec(kind="step", name="order", run_id="order", bundle=workload, data_dir=tmp_path,
                                folder=tmp_path, env={}, command=SAY_ORDER))
    seen = b"".join(job.stream()).decode().split()
    job.wait()
    done = runner.dataset_command(workload, [], timeout_s=60, on_line=lambda line: None)
    return [*seen, done.stdout.strip()]


class _Containers:
    """The part of the Docker SDK's client a seed's and a dataset command's container go through."""

    def __init__(self) -> None:
        self.created: list[dict] = []

    def create(self, *image: str, **options):
        from types import SimpleNamespace

        self.created.append(options)
        return SimpleNamespace(start=lambda: None, short_id="c0ffee", wait=lambda **kw: {"StatusCode": 0},
                               logs=lambda stream=False, **kw: iter([]) if stream else b"", remove=lambda **kw: None)


def _docker_environments(tmp_path: Path) -> list[dict]:
    from types import SimpleNamespace

    from orchestrator.runners.docker.runner import DockerRunner

    runner = DockerRunner(Path("."), gpus="all")
    containers = _Containers()
    runner._client = SimpleNamespace(containers=containers)
    runner._image = SimpleNamespace(tag="mltrain/fakebench:test")
    workload = _say_order_workload()
    runner.submit(JobSpec(kind="step", name="order", run_id="order", bundle=workload, data_dir=tmp_path,
                          folder=tmp_path, env={}, command=SAY_ORDER))
    runner.dataset_command(workload, [], timeout_s=5, on_line=lambda line: None)
    return [options["environment"] for options in containers.created]


def _slurm_script_and_srun_env(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    import subprocess

    from orchestrator.runners import proc
    from orchestrator.runners.slurm import SlurmRunner

    workload = load_workload(TEST_WORKLOADS / "fakebench")
    job = JobSpec(kind="seed", name="seed1", run_id="r", seed=1, bundle=workload, command=workload.run, args=("1",),
                  data_dir=Path("/d"), folder=Path("/r"), env={})
    script = batch_script(job, SlurmOptions(gpus="2"), project_root=Path("/p"), output=Path("/o"))
    order = [line.split("=", 1)[1] for line in script.splitlines() if line.startswith("export CUDA_DEVICE_ORDER=")]
    seen: dict = {}

    def run_streaming(argv, *, cwd, env, timeout_s, on_line):
        seen.update(env)
        return subprocess.CompletedProcess(argv, 0, "", "")

    monkeypatch.setattr(proc, "run_streaming", run_streaming)
    SlurmRunner(Path("/p"), SlurmOptions()).dataset_command(workload, [], timeout_s=60, on_line=lambda line: None)
    return [*order, seen.get("CUDA_DEVICE_ORDER", "unset")]


def test_every_job_mltrain_starts_numbers_gpus_in_pci_bus_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """CUDA's default numbers the fastest GPU first; NVML (and nvidia-smi, and a Docker device id) number them
    in PCI bus order. Seeds, probe, throughput and dataset commands get CUDA_DEVICE_ORDER=PCI_BUS_ID on every
    runner, so that CUDA's GPU 1 is NVML's GPU 1 on a node of mixed models too."""
    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)
    assert _local_job_and_dataset_command(tmp_path) == ["order=PCI_BUS_ID", "order=PCI_BUS_ID"]
    assert [env.get("CUDA_DEVICE_ORDER") for env in _docker_environments(tmp_path)] == ["PCI_BUS_ID"] * 2
    assert _slurm_script_and_srun_env(monkeypatch) == ["PCI_BUS_ID", "PCI_BUS_ID"]


def test_a_device_order_the_user_set_is_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "FASTEST_FIRST")
    assert _local_job_and_dataset_command(tmp_path) == ["order=FASTEST_FIRST", "order=FASTEST_FIRST"]
    assert [env.get("CUDA_DEVICE_ORDER") for env in _docker_environments(tmp_path)] == ["FASTEST_FIRST"] * 2
    assert _slurm_script_and_srun_env(monkeypatch) == ["FASTEST_FIRST", "FASTEST_FIRST"]
