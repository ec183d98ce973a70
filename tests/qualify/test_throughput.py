"""The workload's throughput mode as a check (through fakebench's stdlib throughput mode), and the
full suite's time-to-train seed scored like `mltrain run`."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from orchestrator.errors import EXIT_WARN
from tests.conftest import TEST_WORKLOADS


def throughput(cli, tmp_path: Path, *extra: str) -> tuple[int, dict]:
    r = cli("qualify", "--suite", "throughput_only", "--results", str(tmp_path / "r"), "--node-name", "n1",
            "--json", "--expect-gpus", "0", *extra)  # a CPU node, declared so: it may PASS
    record = json.loads(r.out)
    return r.code, next(c for c in record["checks"] if c["name"] == "throughput")


def test_samples_per_second_step_time_and_resolved_settings(cli, tmp_path: Path):
    code, check = throughput(cli, tmp_path)
    assert code == 0 and check["status"] == "pass"
    values = {m["metric"]: (m["value"], m["unit"]) for m in check["measurements"]}
    assert values == {"throughput_samples_per_s": (100.0, "samples/s"), "step_ms_median": (20.0, "ms")}
    assert check["facts"]["resolved_settings"]["device"] == "cpu"
    assert check["facts"]["env"] == {"STEPS": "5", "WARMUP_STEPS": "2"}
    assert "give --data" in check["facts"]["loader"]


def test_an_input_bound_node_warns_naming_both_rates(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    data = tmp_path / "data"
    data.mkdir()
    (data / "case.bin").write_bytes(b"x" * 1000)
    monkeypatch.setenv("FAKE_LOADER_RATE", "40")
    code, check = throughput(cli, tmp_path, "--data", str(data))
    assert code == EXIT_WARN and check["status"] == "warn"
    assert check["reasons"] == ["input-bound: the loader delivers 40 samples/s, the steps consume 100 samples/s"
                                " (more loader workers or faster storage)"]


@pytest.mark.parametrize(("mode", "code", "status", "reason"), [
    ("xid", 1, "fail", "fakebench throughput: GPU fault (Xid / ECC / fell off the bus)"),
    ("oom", 3, "inconclusive", "fakebench throughput: GPU out of memory: lower the per-GPU batch size"),
    ("crash", 3, "inconclusive", "fakebench throughput failed in its own code, which says nothing about the node"
                                 " (no GPU error in its output): exited with status 1: RuntimeError: fakebench"),
    ("no_result", 3, "inconclusive", "fakebench throughput exited 0 without a final `throughput` MLLOG line holding"
                                     " a finite number: the workload's fault"),
    ("bad_input", 3, "inconclusive",
     "fakebench throughput refused the suite's settings (exit 2): error: STEPS must be"),
])
def test_failures_are_classified(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode, code, status, reason):
    """Only the GPU's own error FAILs the node; the workload's crash, its missing number and more memory
    than the suite's settings fit say nothing about the node: INCONCLUSIVE."""
    monkeypatch.setenv("FAKE_THROUGHPUT_MODE", mode)
    got, check = throughput(cli, tmp_path)
    assert (got, check["status"]) == (code, status), check["reasons"]
    assert check["reasons"][0].startswith(reason), check["reasons"]
    if mode == "oom":
        assert "the suite's throughput settings (steps 5) ask more memory than this node has" in check["reasons"][0]
    if status == "inconclusive":
        assert check["remediation"] == []  # no remedy for the node: nothing was found wrong with it


@pytest.mark.parametrize(("rate", "words"), [
    ("-100", "throughput_samples_per_s -100 samples/s is no measurement: a throughput number is above 0"),
    ("0", "throughput_samples_per_s 0 samples/s is no measurement"),
    ("nan", "fakebench throughput exited 0 without a final `throughput` MLLOG line holding a finite number"),
    ("1e12", "throughput_samples_per_s 1e+12 samples/s is no measurement: a throughput number is above 0 and at"
             " most 1e+09"),
])
def test_a_throughput_that_is_no_number_is_inconclusive_never_pass(cli, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch, rate, words):
    """-100 samples/s passed, exit 0: every number has a sanity rule on its sign and range (its check's
    declaration), outside which it is no measurement."""
    monkeypatch.setenv("FAKE_RATE", rate)
    got, check = throughput(cli, tmp_path)
    assert (got, check["status"]) == (3, "inconclusive"), check
    assert any(words in reason for reason in check["reasons"]), check["reasons"]
    assert "throughput_samples_per_s" not in {m["metric"] for m in check["measurements"]}


def test_a_process_the_step_left_running_is_stopped_and_said_without_changing_the_verdict(
        cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The runner stopped what a qualify step left running, and said so only in the job's log."""
    monkeypatch.setenv("FAKE_THROUGHPUT_MODE", "daemon")
    r = cli("qualify", "--suite", "throughput_only", "--results", str(tmp_path / "r"), "--node-name", "n1", "--json",
            "--expect-gpus", "0")
    check = next(c for c in json.loads(r.out)["checks"] if c["name"] == "throughput")
    assert r.code == 0 and check["status"] == "pass", r.err  # a stray worker is the workload's, not the node's
    note = check["facts"]["leftovers"]
    assert re.fullmatch(r"job \S+ left 1 process running after it ended, stopped: pid \d+ \(sleep\)", note), note
    assert f"warning: {note} (checks: throughput)" in r.err.splitlines()
    pid = int(note.split("pid ")[1].split()[0])
    assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]


def test_a_workload_without_a_throughput_mode_is_not_applicable(cli, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch):
    workloads = tmp_path / "workloads"
    shutil.copytree(TEST_WORKLOADS / "fakebench", workloads / "fakebench")
    declaration = workloads / "fakebench" / "workload.yaml"
    declaration.write_text(declaration.read_text().replace("throughput: [bash, throughput.sh]\n", ""))
    monkeypatch.setenv("MLTRAIN_WORKLOADS", str(workloads))
    monkeypatch.setenv("MLTRAIN_QUALIFY_FILE", str(TEST_WORKLOADS / "qualify.yaml"))
    code, check = throughput(cli, tmp_path)
    assert code == 3 and check["status"] == "not_applicable"  # the suite measured nothing else: INCONCLUSIVE
    assert check["reasons"] == ["workload fakebench declares no throughput mode (workload.yaml `throughput:`)"]


def test_the_full_suite_adds_one_time_to_train_seed_scored_like_run(cli, tmp_path: Path):
    results = tmp_path / "r"
    r = cli("qualify", "--suite", "full", "--results", str(results), "--node-name", "n1", "--json",
            "--expect-gpus", "0")
    assert r.code == 0, r.err
    record = json.loads(r.out)
    ttt = next(c for c in record["checks"] if c["name"] == "time_to_train")
    assert ttt["status"] == "pass" and ttt["facts"]["profile"] == "smoke"
    (m,) = ttt["measurements"]
    run_id = record["time_to_train_run"]
    assert m["metric"] == "time_to_train_s" and run_id == ttt["facts"]["run_id"]
    shown = json.loads(cli("show", run_id, "--results", str(results), "--json").out)["summary"]
    # the same olympic rule as `mltrain run`, over one seed: the score is that seed's time-to-train
    assert shown["score_ms"] == pytest.approx(m["value"] * 1000) and shown["counted_seeds"] == [1]
    assert shown["valid"] and shown["profile"] == "smoke"
    listed = cli("list", "--results", str(results), "--json")
    assert run_id in listed.out
