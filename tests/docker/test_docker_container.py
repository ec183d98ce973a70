"""The DockerRunner itself against a real engine: how a seed's container is made, cancelled,
removed; out-of-memory; the cache drop; results owned by the invoking user."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import docker
import pytest

from orchestrator.config.workloads import Registry, Workload
from orchestrator.runners.base import LABEL_RUN_ID, LABEL_SEED, LABEL_WORKLOAD, JobSpec
from orchestrator.runners.docker.probes import STACK_LIMIT
from orchestrator.runners.docker.runner import DockerJob, DockerRunner

pytestmark = [pytest.mark.docker, pytest.mark.usefixtures("docker_engine", "no_leftover_containers")]

PROJECT = Path(__file__).resolve().parents[2]
FAKEBENCH_ROOT = PROJECT / "tests" / "workloads"


@pytest.fixture
def fakebench() -> Workload:
    return Registry([FAKEBENCH_ROOT]).get("fakebench")


def _job(fakebench: Workload, tmp_path: Path, seed: int, env: dict[str, str]) -> JobSpec:
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    return JobSpec(
        kind="seed", name=f"seed{seed}", run_id="unit-run", seed=seed, bundle=fakebench, command=fakebench.run,
        args=(str(seed),), data_dir=data, folder=tmp_path / "seeds" / str(seed),
        env={"QUALITY_THRESHOLD": "0.908", "MLTRAIN_PROFILE": "qualify", **env},
        labels={"team": "perf"},
    )


def _wait_running(client: docker.DockerClient, job: DockerJob, timeout_s: float = 60) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        attrs = client.api.inspect_container(job.container.id)
        if attrs["State"]["Running"]:
            return attrs
        time.sleep(0.1)
    raise AssertionError("the seed's container never ran")


def test_seed_container_is_made_as_the_mlperf_harness_makes_it(
    docker_engine, test_base_image: str, fakebench: Workload, tmp_path: Path
):
    statuses: list[str] = []
    runner = DockerRunner(PROJECT, shm_size="256m", on_status=statuses.append)
    provenance = runner.prepare(fakebench)
    assert provenance["image"]["tag"].startswith("mltrain/fakebench:")
    job = runner.submit(_job(fakebench, tmp_path, 7, {"FAKE_MODE": "hang"}))
    try:
        attrs = _wait_running(docker_engine, job)
    finally:
        job.cancel()
    ended = job.wait()
    config, host = attrs["Config"], attrs["HostConfig"]
    # argv as values, never a shell line; the seed is the only argument
    assert config["Entrypoint"] == ["bash", "workloads/fakebench/run_and_time.sh"] and config["Cmd"] == ["7"]
    assert config["WorkingDir"] == "/workspace" and config["User"] == f"{os.getuid()}:{os.getgid()}"
    env = dict(item.split("=", 1) for item in config["Env"])
    assert env["DATADIR"] == "/data" and env["RESULTS_DIR"] == "/results" and env["FAKE_MODE"] == "hang"
    assert config["Labels"][LABEL_RUN_ID] == "unit-run" and config["Labels"][LABEL_SEED] == "7"
    assert config["Labels"][LABEL_WORKLOAD] == "fakebench" and config["Labels"]["team"] == "perf"
    assert host["NetworkMode"] == "none" and host["IpcMode"] == "host"
    assert provenance["container"]["shm_size"] == "host /dev/shm (ipc=host)"
    assert host["Init"] is True and not host.get("Privileged")
    limits = {u["Name"]: (u["Soft"], u["Hard"]) for u in host["Ulimits"]}
    assert limits["stack"] == (STACK_LIMIT, STACK_LIMIT)
    if "memlock" in provenance["container"]["ulimits"]:
        assert limits["memlock"] == (-1, -1)
    else:  # an engine whose own hard limit is lower (this sandbox): said so, and recorded
        assert "memlock" not in limits and "memlock" in provenance["container"]["ulimits_note"]
        assert any("memlock" in s for s in statuses)
    mounts = {m["Destination"]: m for m in attrs["Mounts"]}
    assert mounts["/data"]["Source"] == str((tmp_path / "data").resolve()) and mounts["/data"]["RW"] is False
    assert mounts["/results"]["Source"] == str((tmp_path / "seeds" / "7" / "results").resolve())
    assert mounts["/results"]["RW"] is True
    assert host.get("DeviceRequests") in (None, [])
    # cancelled: stopped (SIGTERM through the init process), then removed
    assert ended.code is not None and ended.code != 0 and "stopped by mltrain" in ended.detail
    with pytest.raises(docker.errors.NotFound):
        docker_engine.api.inspect_container(job.container.id)


def test_output_streams_while_the_container_runs(docker_engine, test_base_image: str, fakebench, tmp_path: Path):
    runner = DockerRunner(PROJECT)
    runner.prepare(fakebench)
    job = runner.submit(_job(fakebench, tmp_path, 3, {"FAKE_SLEEP_S": "0.05"}))
    first_chunk_at: list[float] = []
    chunks: list[bytes] = []
    for chunk in job.stream():
        if not first_chunk_at:
            first_chunk_at.append(time.monotonic())
            assert docker_engine.api.inspect_container(job.container.id)["State"]["Running"]
        chunks.append(chunk)
    ended = job.wait()
    text = b"".join(chunks).decode()
    assert ended.code == 0 and not ended.oom_killed
    assert text.count(":::MLLOG") > 100 and '"key": "run_stop"' in text and "RESULT,fakebench,3," in text


def test_out_of_memory_kill_is_reported(docker_engine, test_base_image: str):
    container = docker_engine.containers.create(
        test_base_image, ["python3", "-c", "blocks = [bytearray(64 << 20) for _ in range(64)]"],
        network_mode="none", mem_limit="96m", memswap_limit="96m", labels={LABEL_RUN_ID: "unit-oom"},
    )
    container.start()
    ended = DockerJob(container).wait()
    assert ended.oom_killed and ended.code == 137 and "out-of-memory" in ended.detail


def test_results_belong_to_the_invoking_user(
    docker_engine, test_base_image: str, fakebench: Workload, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """The container runs as the caller's uid:gid; as root here, pretend to be uid 4321."""
    job = _job(fakebench, tmp_path, 2, {})
    job.results_dir.mkdir(parents=True)
    if os.getuid() == 0:
        os.chown(job.results_dir, 4321, 4321)
        with monkeypatch.context() as m:
            m.setattr(os, "getuid", lambda: 4321)
            m.setattr(os, "getgid", lambda: 4321)
            runner = DockerRunner(PROJECT)
        expected = 4321
    else:
        runner = DockerRunner(PROJECT)
        expected = os.getuid()
    runner.prepare(fakebench)
    handle = runner.submit(job)
    for _ in handle.stream():
        pass
    assert handle.wait().code == 0
    written = job.results_dir / "mllog.txt"
    assert written.stat().st_uid == expected and written.stat().st_gid == expected


def test_drop_caches_is_done_and_recorded(docker_engine, test_base_image: str, fakebench, tmp_path: Path):
    statuses: list[str] = []
    runner = DockerRunner(PROJECT, drop_caches=True, on_status=statuses.append)
    provenance = runner.prepare(fakebench)
    assert provenance["drop_caches"] and "drop_caches" in provenance["drop_caches"]
    handle = runner.submit(_job(fakebench, tmp_path, 1, {}))
    for _ in handle.stream():
        pass
    assert handle.wait().code == 0
    assert sum(s.startswith("cache_clear: ") for s in statuses) == 2  # prepare, then before the seed


def test_cancel_from_another_thread_ends_stream_and_wait(docker_engine, test_base_image, fakebench, tmp_path: Path):
    runner = DockerRunner(PROJECT)
    runner.prepare(fakebench)
    job = runner.submit(_job(fakebench, tmp_path, 5, {"FAKE_MODE": "hang"}))
    _wait_running(docker_engine, job)
    stopper = threading.Timer(0.5, job.cancel)
    started = time.monotonic()
    stopper.start()
    for _ in job.stream():
        pass
    ended = job.wait()
    job.cancel()  # idempotent, also after removal
    assert time.monotonic() - started < 8  # SIGTERM reached the workload: the 10 s grace was not needed
    assert ended.code in (143, 137) and "stopped by mltrain" in ended.detail


def test_private_ipc_gets_a_shm_of_the_given_size(docker_engine, test_base_image: str, fakebench, tmp_path: Path):
    runner = DockerRunner(PROJECT, ipc="private", shm_size="96m")
    assert runner.prepare(fakebench)["container"]["shm_size"] == "96m"
    job = runner.submit(_job(fakebench, tmp_path, 1, {"FAKE_MODE": "hang"}))
    try:
        host = _wait_running(docker_engine, job)["HostConfig"]
    finally:
        job.cancel()
    job.wait()
    assert host["IpcMode"] == "private" and host["ShmSize"] == 96 * 2**20
