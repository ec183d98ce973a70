"""The inference check (issue 20): the inference harness's smoke model under the real LoadGen,
through the local runner, its 90th-percentile latency judged like every performance number (the
operator's references, the quorum), a harness that refuses the node's device INCONCLUSIVE."""

from __future__ import annotations

import json
from pathlib import Path

import onnxruntime
import pytest

from orchestrator.errors import EXIT_INFRASTRUCTURE, EXIT_INVALID_RESULT
from tests.conftest import TEST_WORKLOADS
from tests.inference import tiny


@pytest.fixture
def tiny_smoke(mltrain_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Path:
    """The harness's smoke assets, made by hand in the test's cache (a tiny network, 24 JPEGs) so that
    no smoke model is trained; the suites of tests/workloads/qualify.yaml."""
    folder = Path(mltrain_env["XDG_CACHE_HOME"]) / "mltrain" / "data" / "inference" / "resnet50-smoke"
    folder.mkdir(parents=True)
    tiny.export(folder / "model.onnx", side=32, classes=10)
    tiny.dataset(folder / "data")
    (folder / "smoke.json").write_text(json.dumps({
        "model": "resnet50", "harness_args": ["--image-size", "32,32", "--label-offset", "0"],
        "input_shape": [3, 32, 32], "reference_top1": 0.25, "seconds": 1.0}))  # as the harness writes it
    monkeypatch.setenv("MLTRAIN_QUALIFY_FILE", str(TEST_WORKLOADS / "qualify.yaml"))
    return folder


def inference(record: dict) -> dict:
    return next(c for c in record["checks"] if c["name"] == "inference")


def test_the_inference_check_times_the_smoke_model_under_loadgen(cli, tiny_smoke: Path, tmp_path: Path):
    r = cli("qualify", "--suite", "inference_only", "--results", str(tmp_path / "r"), "--node-name", "n1", "--json",
            "--expect-gpus", "0")  # a CPU node, declared so: it may PASS
    assert r.code == 0, r.err
    check = inference(json.loads(r.out))
    assert check["status"] == "pass" and check["kind"] == "workload"
    (m,) = check["measurements"]
    assert m["metric"] == "inference_p90_ms" and m["unit"] == "ms" and m["better"] == "lower" and m["value"] > 0
    assert check["facts"]["loadgen"]["queries"] > 0 and check["facts"]["backend"] == "onnxruntime"
    detail = (Path(check["facts"]["output"]).parent / "results" / "performance" / "run_1" / "mlperf_log_detail.txt")
    assert detail.is_file()  # LoadGen's own log, the number's source, kept beside the record


def test_a_latency_above_the_operators_reference_fails_after_the_quorum(cli, tiny_smoke: Path, tmp_path: Path):
    refs = tmp_path / "refs.yaml"
    refs.write_text("systems:\n  - model: '*'\n    source: a latency no CPU reaches\n"
                    "    references: {inference_p90_ms: [0.000001, null, 0.10, ms]}\n")
    r = cli("qualify", "--suite", "inference_only", "--results", str(tmp_path / "r"), "--node-name", "n1", "--json",
            "--references", str(refs))
    assert r.code == EXIT_INVALID_RESULT, r.err
    check = inference(json.loads(r.out))
    (m,) = check["measurements"]
    assert check["status"] == "fail" and m["status"] == "fail" and m["quorum"]["outcome"] == "confirmed"
    assert len(m["quorum"]["repeats"]) == 2  # the harness ran twice more, each time over its bound
    assert "inference_p90_ms" in check["reasons"][0] and "above the upper bound" in check["reasons"][0]


@pytest.mark.skipif("CUDAExecutionProvider" in onnxruntime.get_available_providers(),
                    reason="onnxruntime-gpu here: the harness would not refuse")
def test_a_device_the_harness_cannot_use_is_inconclusive_not_a_pass(cli, tiny_smoke: Path, tmp_path: Path):
    r = cli("qualify", "--suite", "inference_refused", "--results", str(tmp_path / "r"), "--node-name", "n1",
            "--json")
    assert r.code == EXIT_INFRASTRUCTURE, r.err
    check = inference(json.loads(r.out))
    assert check["status"] == "inconclusive" and check["measurements"] == []
    (reason,) = check["reasons"]
    assert reason.startswith("the inference harness refused the suite's settings (exit 2): inference: ONNX Runtime"
                             " here has no CUDAExecutionProvider"), reason


def test_a_model_no_harness_declares_is_bad_input_found_at_load(cli, tiny_smoke: Path, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch):
    """qualify.yaml's fault, not the node's: exit 2 before anything runs (it was INCONCLUSIVE on every node)."""
    config = tmp_path / "qualify.yaml"
    config.write_text((TEST_WORKLOADS / "qualify.yaml").read_text().replace(
        "inference: {model: resnet50, scenario: SingleStream, seconds: 1}",
        "inference: {model: no-such-model, scenario: SingleStream, seconds: 1}"))
    monkeypatch.setenv("MLTRAIN_QUALIFY_FILE", str(config))
    r = cli("qualify", "--suite", "inference_only", "--results", str(tmp_path / "r"), "--node-name", "n1", "--json")
    assert r.code == 2 and r.out == "", r.err
    assert "suites.inference_only.cpu.inference: unknown inference model 'no-such-model'" in r.err


def test_a_smoke_model_missing_from_the_cache_is_inconclusive(cli, tiny_smoke: Path, tmp_path: Path):
    (tiny_smoke / "model.onnx").unlink()  # the cache damaged after the model was made
    r = cli("qualify", "--suite", "inference_only", "--results", str(tmp_path / "r"), "--node-name", "n1", "--json")
    assert r.code == EXIT_INFRASTRUCTURE, r.err
    (reason,) = inference(json.loads(r.out))["reasons"]
    assert reason.startswith("could not prepare the resnet50 inference check: ") and "model.onnx" in reason, reason


@pytest.mark.parametrize(("said", "code", "status", "reason"), [
    ("Traceback (most recent call last):\nKeyError: 'image'\n", EXIT_INFRASTRUCTURE, "inconclusive",
     "the inference harness failed in its own code, which says nothing about the node (no GPU error in its output):"
     " exited with status 1: KeyError: 'image'"),
    ("NVRM: Xid (PCI:0000:3b:00): 48, pid=7, An uncorrectable double bit error\n", EXIT_INVALID_RESULT, "fail",
     "the inference harness: GPU fault (Xid / ECC / fell off the bus)"),
])
def test_a_harness_crash_is_the_harnesss_a_gpu_error_the_nodes(cli, tiny_smoke: Path, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch, said, code, status,
                                                               reason):
    """The harness dying of its own exception FAILed the node; only the GPU's own error does (one rule
    with the workload's throughput mode)."""
    import orchestrator.qualify.inference as check
    from orchestrator.results.records import Exit
    from orchestrator.runners.outcome import JobOutcome

    def crashed(runner, harness, **job):
        job["folder"].mkdir(parents=True, exist_ok=True)
        log = job["folder"] / "output.log"
        log.write_text(said)
        return JobOutcome(job_id="j1", exit=Exit(code=1), timed_out=False, lost="", seconds=0.1, log=log)

    monkeypatch.setattr(check, "run_harness", crashed)
    r = cli("qualify", "--suite", "inference_only", "--results", str(tmp_path / "r"), "--node-name", "n1", "--json",
            "--expect-gpus", "0")
    assert r.code == code, r.err
    found = inference(json.loads(r.out))
    assert found["status"] == status and found["reasons"][0].startswith(reason), found["reasons"]
