"""`mltrain run --runner docker` against a real engine, on the fake workload."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from orchestrator.runners.base import LABEL_SEED

pytestmark = [pytest.mark.docker, pytest.mark.usefixtures("docker_engine", "no_leftover_containers")]

EPOCHS = {s: 20 + (7 * s) % 11 for s in range(1, 10)}  # fakebench: epochs-to-target of seed s


def _profiles(tmp_path: Path, env: dict[str, str], timeout_minutes: float = 1) -> Path:
    """A seeds.yaml for fakebench whose qualify profile hands `env` to the workload."""
    path = tmp_path / "seeds.yaml"
    body = {
        "default_profile": "qualify",
        "workloads": {
            "fakebench": {
                "qualify": {
                    "seeds": "1-3", "drop_per_end": 1, "max_non_converged": 1,
                    "timeout_minutes": timeout_minutes, "dataset": {"source": "synthetic"},
                    "env": {"FAKE_SLEEP_S": "0.002", **env},
                }
            }
        },
    }
    path.write_text(json.dumps(body))  # JSON is YAML
    return path


def _run_id(results: Path) -> str:
    return next(p.name for p in results.iterdir() if p.is_dir())


def test_three_seeds_build_once_and_score_like_the_local_runner(docker_cli, tmp_path: Path):
    results = tmp_path / "docker"
    first = docker_cli("run", "fakebench", "--runner", "docker", "--gpus", "none", "--seeds", "1-3",
                       "--results", str(results), "--json")
    assert first.code == 0, first.err
    assert "Successfully built" in first.err or "up to date" in first.err
    run_id = _run_id(results)
    summary = json.loads(first.out)
    assert {int(s): v["status"] for s, v in summary["per_seed"].items()} == {1: "converged", 2: "converged",
                                                                          3: "converged"}

    # The second run reuses the image: no build step at all.
    again = docker_cli("run", "fakebench", "--runner", "docker", "--gpus", "none", "--seeds", "1-3",
                       "--results", str(results), "--json")
    assert again.code == 0, again.err
    assert "up to date" in again.err and "Step 1/" not in again.err

    # Same record as the local runner: fakebench's logged clock is virtual, so the times are exact.
    local = docker_cli("run", "fakebench", "--runner", "local", "--seeds", "1-3",
                       "--results", str(tmp_path / "local"), "--json")
    assert local.code == 0, local.err
    local_summary = json.loads(local.out)
    assert summary["score_ms"] == pytest.approx(local_summary["score_ms"])
    for seed in ("1", "2", "3"):
        assert summary["per_seed"][seed]["status"] == local_summary["per_seed"][seed]["status"]
    shown = json.loads(docker_cli("show", run_id, "--results", str(results), "--json").out)
    assert {int(s): r["epochs_to_target"] for s, r in shown["records"].items()} == {s: EPOCHS[s] for s in (1, 2, 3)}
    listed = json.loads(docker_cli("list", "--results", str(results), "--json").out)
    assert {row["run_id"] for row in listed} >= {run_id} and all(row["runner"] == "docker" for row in listed)

    # Provenance in the manifest, and files in /results owned by the invoking user.
    manifest = shown["manifest"]
    provenance = manifest["runner_provenance"]
    assert provenance["image"]["id"].startswith("sha256:") and provenance["image"]["tag"].startswith("mltrain/")
    assert provenance["base_image"]["ref"] == "mltrain-test-base:bookworm"
    assert provenance["versions"]["python"].startswith("3.")
    for seed in (1, 2, 3):
        written = results / run_id / "seeds" / str(seed) / "results" / "mllog.txt"
        assert written.is_file() and written.stat().st_uid == os.getuid() and written.stat().st_gid == os.getgid()


def test_seed_containers_are_created_and_removed_one_per_seed(docker_cli, docker_engine, tmp_path: Path):
    results = tmp_path / "r"
    since = time.time() - 1
    r = docker_cli("run", "fakebench", "--runner", "docker", "--seeds", "4-6", "--results", str(results))
    assert r.code == 0, r.err
    run_id = _run_id(results)
    events = docker_engine.events(
        since=since, until=time.time() + 1, decode=True,
        filters={"type": "container", "label": f"mltrain.run_id={run_id}"},
    )
    seen: dict[str, set[str]] = {}
    for event in events:
        attributes = event.get("Actor", {}).get("Attributes", {})
        seen.setdefault(event.get("Action", event.get("status", "")), set()).add(attributes.get(LABEL_SEED, ""))
    assert seen.get("start") == {"4", "5", "6"} and seen.get("destroy") == {"4", "5", "6"}, seen


def test_container_killed_mid_run_is_crashed_and_the_set_goes_on(
    docker_cli, docker_engine, containers, wait_for, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("MLTRAIN_SEEDS_FILE", str(_profiles(tmp_path, {"FAKE_MODE": "hang",
                                                                      "FAKE_MODE_SEEDS": "2"})))
    killed: list[str] = []

    def kill_seed_two() -> None:
        def running_seed_two():
            return [c for c in containers() if c.labels.get(LABEL_SEED) == "2" and c.status == "running"]

        found = wait_for(running_seed_two, 60, "the container of seed 2")
        docker_engine.api.kill(found[0].id)  # what `docker kill` does: SIGKILL from the engine
        killed.append(found[0].name)

    killer = threading.Thread(target=kill_seed_two, daemon=True)
    killer.start()
    r = docker_cli("run", "fakebench", "--runner", "docker", "--results", str(tmp_path / "r"), "--json")
    killer.join(timeout=5)
    assert killed, "seed 2's container was never seen running"
    assert r.code == 3  # an infrastructure fault ended a seed
    per_seed = json.loads(r.out)["per_seed"]
    # The core records a run ended by an outside signal as "killed", its kind of crash.
    assert per_seed["2"]["status"] == "killed"
    assert "signal 9" in per_seed["2"]["reason"] and "137" in per_seed["2"]["reason"]
    assert per_seed["1"]["status"] == per_seed["3"]["status"] == "converged"


def test_sigkilled_orchestrator_then_clean_leaves_no_container(
    docker_cli, cli_process, containers, wait_for, tmp_path: Path
):
    profiles = _profiles(tmp_path, {"FAKE_MODE": "hang"})
    child = cli_process("run", "fakebench", "--runner", "docker", "--results", str(tmp_path / "r"),
                        extra_env={"MLTRAIN_SEEDS_FILE": str(profiles)})
    try:
        wait_for(lambda: [c for c in containers() if c.status == "running" and c.labels.get(LABEL_SEED)], 120,
                 "a running seed container")
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.communicate(timeout=30)
    left = [c.name for c in containers()]
    assert left, "the killed orchestrator should have left its container behind"
    cleaned = docker_cli("clean")
    assert cleaned.code == 0, cleaned.err
    assert all(f"removed {name}" in cleaned.out for name in left)
    assert containers() == []


def test_sigkilled_orchestrator_then_resume_stops_its_container_by_label(
    docker_cli, cli_process, containers, wait_for, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    profiles = _profiles(tmp_path, {"FAKE_MODE": "hang", "FAKE_MODE_SEEDS": "1"}, timeout_minutes=0.1)
    monkeypatch.setenv("MLTRAIN_SEEDS_FILE", str(profiles))
    results = tmp_path / "r"
    child = cli_process("run", "fakebench", "--runner", "docker", "--results", str(results),
                        extra_env={"MLTRAIN_SEEDS_FILE": str(profiles)})
    try:
        found = wait_for(lambda: [c for c in containers() if c.status == "running" and c.labels.get(LABEL_SEED)],
                         120, "a running seed container")
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.communicate(timeout=30)
    run_id = _run_id(results)
    assert [c.labels["mltrain.run_id"] for c in containers()] == [run_id]  # left running by the killed mltrain

    r = docker_cli("run", "fakebench", "--resume", run_id, "--results", str(results), "--json")
    assert f"stopped what an earlier mltrain left running: container {found[0].name}" in r.err, r.err
    assert r.code == 3  # seed 1 hangs again and meets the wall-clock limit
    per_seed = json.loads(r.out)["per_seed"]
    assert per_seed["1"]["status"] == "timed_out" and per_seed["2"]["status"] == "converged"
    assert containers() == []


def test_timeout_stops_and_removes_the_container(docker_cli, containers, tmp_path: Path, monkeypatch):
    monkeypatch.setenv("MLTRAIN_SEEDS_FILE", str(_profiles(tmp_path, {"FAKE_MODE": "hang"}, timeout_minutes=0.1)))
    r = docker_cli("run", "fakebench", "--runner", "docker", "--seeds", "1", "--results", str(tmp_path / "r"),
                   "--json")
    assert r.code == 3
    assert json.loads(r.out)["per_seed"]["1"]["status"] == "timed_out"
    assert containers() == []


def test_no_user_string_reaches_a_shell(docker_cli, tmp_path: Path):
    """Paths and options with shell syntax go to the engine as values: nothing runs them."""
    odd = tmp_path / "d a;$(touch PWNED)`touch PWNED2`"
    r = docker_cli("run", "fakebench", "--runner", "docker", "--seeds", "1", "--results", str(odd / "res"),
                   "--data", str(odd / "data"), "--label", "x; touch PWNED3")
    # --data names a folder that does not exist yet: a one-line data error (its how-to indented below it),
    # and still no shell.
    error, *how_to = r.err.strip().splitlines()
    assert r.code == 2 and error.startswith("error: data folder") and all(line.startswith("  ") for line in how_to)
    docker_cli("data", "fakebench", "synthesize", str(odd / "data"))
    r = docker_cli("run", "fakebench", "--runner", "docker", "--seeds", "1", "--results", str(odd / "res"),
                   "--data", str(odd / "data"), "--label", "x; touch PWNED3", "--json")
    # One seed cannot make a valid qualify result (exit 1), but it ran and converged.
    assert json.loads(r.out)["per_seed"]["1"]["status"] == "converged", r.err
    assert not list(tmp_path.rglob("PWNED*")) and not list(Path.cwd().glob("PWNED*"))


def test_build_command_builds_once_and_rebuild_forces_it(docker_cli):
    first = docker_cli("build", "fakebench")
    assert first.code == 0, first.err
    tag, image_id = first.out.split()
    assert tag.startswith("mltrain/fakebench:") and len(tag.split(":")[1]) == 16 and image_id.startswith("sha256:")
    again = docker_cli("build", "fakebench")
    assert again.code == 0 and again.out == first.out and f"image {tag} is up to date" in again.err
    forced = docker_cli("build", "fakebench", "--rebuild")
    assert forced.code == 0 and "Step 1/" in forced.err and "Using cache" not in forced.err
    assert forced.out.split()[0] == tag


def test_ctrl_c_stops_and_removes_the_running_container(cli_process, containers, wait_for, tmp_path: Path):
    profiles = _profiles(tmp_path, {"FAKE_MODE": "hang"})
    child = cli_process("run", "fakebench", "--runner", "docker", "--results", str(tmp_path / "r"),
                        extra_env={"MLTRAIN_SEEDS_FILE": str(profiles)})
    try:
        wait_for(lambda: [c for c in containers() if c.status == "running" and c.labels.get(LABEL_SEED)], 120,
                 "a running seed container")
        os.killpg(child.pid, signal.SIGINT)
        _, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
    assert child.returncode == 130, err
    assert "interrupted" in err
    assert containers() == []
