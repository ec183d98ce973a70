"""`mltrain qualify --suite llama31_8b`: qualify.yaml's suite that times llama31_8b's throughput mode
(not the file's default workload's), here at the smoke shape on a CPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.llama31_8b.conftest import PROJECT


def test_the_llama31_8b_suite_times_its_throughput_mode_with_tokens_per_device(cli, tmp_path: Path,
                                                                                monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("MLTRAIN_WORKLOADS", str(PROJECT / "workloads"))
    monkeypatch.setenv("MLTRAIN_SEEDS_FILE", str(PROJECT / "seeds.yaml"))
    monkeypatch.setenv("MLTRAIN_QUALIFY_FILE", str(PROJECT / "qualify.yaml"))
    monkeypatch.setenv("PEAK_TFLOPS", "1000")  # a CPU's peak is in no table: as an operator gives one
    result = cli("qualify", "--suite", "llama31_8b", "--results", str(tmp_path / "r"), "--node-name", "n1", "--json",
                 "--expect-gpus", "0")  # a CPU node, declared so: it may PASS
    record = json.loads(result.out)
    assert result.code == 0, result.err
    assert record["workload"] == "llama31_8b" and record["suite"] == "llama31_8b"
    check = next(c for c in record["checks"] if c["name"] == "throughput")
    assert check["status"] == "pass" and check["facts"]["workload"] == "llama31_8b"
    assert check["facts"]["env"] == {"LLAMA31_8B_PRESET": "smoke", "STEPS": "3", "WARMUP_STEPS": "1"}
    meta = check["facts"]["metadata"]
    assert meta["steps"] == 3 and meta["seq_len"] == 64 and meta["tokens_per_second_per_device"] > 0
    values = {m["metric"]: m["value"] for m in check["measurements"]}
    assert values["throughput_samples_per_s"] * 64 == pytest.approx(meta["tokens_per_second"])
    assert values["tokens_per_s_per_device"] == meta["tokens_per_second_per_device"]  # judged by the node's history
    assert meta["peak_tflops"] == 1000 and values["mfu"] == meta["mfu"] == meta["model_tflops_per_device"] / 1000
