"""`--runner slurm-docker`: a seed across nodes whose launcher on each node runs in a container of the
workload's image, on the CI's two-node Slurm cluster and its Docker engine (the nodes share this host
and its one engine): the rendezvous over the host network, the record naming both nodes and the image,
no container left when a node's launcher is killed or the job is cancelled, a missing image named by node."""

from __future__ import annotations

import http.server
import json
import os
import shutil
import signal
import socketserver
import tempfile
import threading
import time
from pathlib import Path

import docker
import psutil
import pytest

from orchestrator.runners.node_container import LABEL_NODE, NodeContainer
from orchestrator.runners.slurm import node_names
from tests.docker.conftest import mltrain_containers

pytestmark = [pytest.mark.slurm, pytest.mark.docker]


def _two_nodes() -> list[str]:
    found = node_names()
    if len(found) < 2:
        pytest.skip(f"the Slurm cluster has {len(found)} node(s); a seed across nodes needs 2")
    return found


def _wait(condition, timeout_s: float, what: str, child=None):  # noqa: ANN001, ANN202
    deadline = time.monotonic() + timeout_s
    while not (value := condition()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        assert child is None or child.poll() is None, f"mltrain ended while waiting for {what}: {child.stderr.read()}"
        time.sleep(0.2)
    return value


def _training(results: Path, seed: int) -> bool:
    """Whether ``seed``'s ranks have met and trained up to the epoch where fakebench's hang mode stops."""
    return any('"epoch_num": 3}' in log.read_text() for log in results.glob(f"*/seeds/{seed}/output.log"))


def _launcher(results: Path, seed: int, node: str) -> psutil.Process:
    """The launcher of ``seed``'s container on ``node`` (`orchestrator.runners.node_container`)."""
    for process in psutil.process_iter(["cmdline"]):
        argv = process.info["cmdline"] or []
        if argv[1:3] == ["-m", "orchestrator.runners.node_container"] and argv[3:] and argv[-1].startswith(
                f"{results}") and f"/seeds/{seed}/" in argv[-1] and "--remove" not in argv:  # not its sampler
            try:
                if process.environ().get("SLURMD_NODENAME") == node:
                    return process
            except psutil.Error:
                continue
    raise AssertionError(f"no launcher of seed {seed} on node {node}")


def test_seeds_in_containers_on_two_nodes_converge_and_leave_no_container_however_they_end(
        cli, cli_process, slurm_env, docker_engine: docker.DockerClient, torch_base_image: str,
        tmp_path: Path):
    names = _two_nodes()
    profiles = tmp_path / "seeds.yaml"  # seed 1 converges; seeds 2 and 3 train until a node is lost or mltrain stops
    profiles.write_text("workloads:\n  fakebench:\n    qualify: {seeds: '1-3', timeout_minutes: 3,"
                        " dataset: {source: synthetic}, env: {FAKE_SLEEP_S: '0.05', FAKE_BASE_EPOCHS: '12',"
                        " FAKE_MODE: hang, FAKE_MODE_SEEDS: '2,3'}}\n")
    results = tmp_path / "results"
    child = cli_process("run", "fakebench", "--runner", "slurm-docker", "--nodes", "2", "--base-image",
                        torch_base_image, "--results", str(results), "--json",
                        extra_env={"MLTRAIN_SEEDS_FILE": str(profiles)})

    def running(seed: int, node: str) -> list:
        return [c for c in mltrain_containers(docker_engine) if c.labels.get("mltrain.seed") == str(seed)
                and c.labels.get(LABEL_NODE) == node and c.status == "running"]

    # seed 2: the second node's launcher is SIGKILLed mid-seed (a node fails): srun ends the first node's,
    # which removes its container; the second's, which nobody stopped, is removed after them
    _wait(lambda: running(2, names[1]) and _training(results, 2), 240, "seed 2 training on both nodes", child)
    os.kill(_launcher(results / "", 2, names[1]).pid, signal.SIGKILL)
    # seed 3 hangs in training; mltrain is stopped: its job is cancelled (scancel) with both containers up
    _wait(lambda: running(3, names[0]) and running(3, names[1]) and _training(results, 3), 120,
          "seed 3 training on both nodes", child)
    (up,) = running(3, names[0])
    attrs = docker_engine.containers.get(up.id).attrs  # as the submitting user, on the host's network
    assert attrs["Config"]["User"] == f"{os.getuid()}:{os.getgid()}" and attrs["HostConfig"]["NetworkMode"] == "host"
    assert up.name.endswith(f"-seed3-{names[0]}")
    os.kill(child.pid, signal.SIGTERM)
    out, err = child.communicate(timeout=120)
    assert child.returncode == 143, err
    (run,) = [p.parent for p in results.glob("*/manifest.json")]
    killed_name = f"mltrain-{run.name}-seed2-{names[1]}"
    assert mltrain_containers(docker_engine, run.name) == [], "a container of the run was left behind"

    first = json.loads((run / "seeds" / "1" / "run.json").read_text())
    assert first["status"] == "converged"
    placement = first["placement"]
    assert [n["name"] for n in placement["nodes"]] == names[:2] and placement["world_size"] == 2
    assert placement["backend"] == "gloo"
    output = (run / "seeds" / "1" / "output.log").read_text()
    assert output.count("fakebench: rank ") == 2 and output.count('"key": "run_start"') == 1
    manifest = json.loads((run / "manifest.json").read_text())
    provenance = manifest["runner_provenance"]
    assert manifest["runner"] == "slurm-docker" and provenance["nodes"] == 2
    assert provenance["image"]["tag"].startswith("mltrain/fakebench:") and provenance["image_on_nodes"] == names
    assert provenance["base_image"]["ref"] == torch_base_image
    image = f"{provenance['image']['tag']}@{provenance['image']['id']}"
    assert [n["container"] for n in placement["nodes"]] == [image, image]  # each node says the image it ran
    spec = NodeContainer.model_validate_json((run / "seeds" / "1" / "container.json").read_text())
    assert spec.image == provenance["image"]["tag"] and spec.user == f"{os.getuid()}:{os.getgid()}"
    written = list((run / "seeds" / "1" / "results").iterdir())
    assert written and all(p.stat().st_uid == os.getuid() for p in written)  # the submitting user's files

    second = json.loads((run / "seeds" / "2" / "run.json").read_text())
    assert second["status"] == "crashed" and f"node {names[1]} (task 1: Killed)" in second["reason"], second["reason"]
    assert f"node {names[1]}: removed container {killed_name}, which its launcher left" in (
        run / "seeds" / "2" / "output.log").read_text()
    third = json.loads((run / "seeds" / "3" / "state.json").read_text())
    assert third["state"] == "interrupted", third


class _Engine(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


class _EmptyEngine(http.server.BaseHTTPRequestHandler):
    """A node's Docker engine that holds no image: its API's answers to a ping, its version and an image
    inspection (404, as dockerd answers for an image it does not hold)."""

    def address_string(self) -> str:
        return "node"

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802 - the handler's name
        path = self.path.split("?")[0]
        if path.endswith("/_ping"):
            self._answer(200, b"OK", "text/plain")
        elif path.endswith("/version"):
            self._answer(200, json.dumps({"ApiVersion": "1.43", "Version": "24.0.0"}).encode())
        else:
            self._answer(404, json.dumps({"message": f"No such image: {path}"}).encode())

    def do_HEAD(self) -> None:  # noqa: N802
        self._answer(200, b"", "text/plain")

    def _answer(self, code: int, body: bytes, kind: str = "application/json") -> None:
        self.send_response(code)
        self.send_header("Content-Type", kind)
        self.send_header("Api-Version", "1.43")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def test_an_image_missing_on_a_node_is_one_line_naming_it_before_anything_is_written(
        cli, slurm_env, docker_engine: docker.DockerClient, test_base_image: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch):
    names = _two_nodes()
    engines = Path(tempfile.mkdtemp(prefix="engines.", dir="/tmp"))  # a socket's path is short
    # the first node's engine is this host's; the second's holds no image
    (engines / f"{names[0]}.sock").symlink_to(os.environ["DOCKER_HOST"].removeprefix("unix://"))
    empty = _Engine(str(engines / f"{names[1]}.sock"), _EmptyEngine)
    threading.Thread(target=empty.serve_forever, daemon=True).start()
    monkeypatch.setenv("MLTRAIN_NODE_DOCKER_HOST", f"unix://{engines}/{{node}}.sock")
    try:
        r = cli("run", "fakebench", "--seeds", "1", "--runner", "slurm-docker", "--nodes", "2",
                "--results", str(tmp_path / "r"))
    finally:
        empty.shutdown()
        empty.server_close()
        shutil.rmtree(engines)
    errors = [line for line in r.err.splitlines() if line.startswith("error:")]  # the others: the build's status
    assert r.code == 2 and len(errors) == 1 and r.err.splitlines()[-1] == errors[0], r.err
    assert f"is not on node {names[1]} (of {', '.join(names)}): load it there" in errors[0], r.err
    assert not (tmp_path / "r").exists()
