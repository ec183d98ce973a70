"""`mltrain infer` through the real LoadGen and ONNX Runtime on this CPU, with a tiny model and
short tests: every scenario, the record against LoadGen's own summary, INVALID where the official
minimums are not met, bad model and data refused before anything is written, and the store's
verbs (list, show, compare, report, export) on inference runs."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from orchestrator.results.store import Store
from tests.conftest import PROJECT
from tests.core.running import terminated_while_pydantic_builds_a_validator
from tests.inference import tiny

SCENARIOS = ("SingleStream", "MultiStream", "Server", "Offline")


@pytest.fixture(scope="module")
def assets(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("tiny")
    return tiny.export(folder / "tiny.onnx"), tiny.dataset(folder / "data")


def infer(cli, assets: tuple[Path, Path], results: Path, *args: str):
    model, data = assets
    return cli("infer", "resnet50", "--profile", "qualify", "--model", str(model), "--data", str(data),
               "--results", str(results), "--count", str(tiny.IMAGES), "--json", *args)


def summary_verdict(run: Path) -> str:
    text = (run / "performance" / "run_1" / "mlperf_log_summary.txt").read_text()
    return next(line.split(":")[1].strip() for line in text.splitlines() if line.startswith("Result is"))


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_every_scenario_runs_the_real_loadgen_and_says_invalid_where_the_official_minimums_are_not_met(
        cli, assets, tmp_path: Path, scenario: str):
    r = infer(cli, assets, tmp_path / "r", "--scenario", scenario, "--time", "1", "--target-qps", "auto",
              "--target-latency-ms", "auto")
    assert r.code in (0, 1), r.err
    record = json.loads(r.out)
    run = tmp_path / "r" / record["run_id"]
    result = record["result"]
    perf = result["performance"]
    assert record["state"] == "finished" and perf["scenario"] == scenario
    assert perf["value"] > 0 and perf["latency"]["percentiles_ns"]["50.00"] > 0
    assert summary_verdict(run) == ("VALID" if perf["loadgen_valid"] else "INVALID")
    assert perf["loadgen_valid"] or perf["loadgen_reasons"]
    assert result["valid"] is False
    assert "min_duration_ms 1000 < 600000 (mlperf.conf)" in result["official_gaps"]
    assert "no accuracy run" in result["official_gaps"]
    assert result["harness"]["providers"][0] == "CPUExecutionProvider" and result["harness"]["model_load_s"] > 0
    assert r.code == (0 if perf["loadgen_valid"] else 1)
    assert (run / "user.conf").is_file() and (run / "jobs" / "main" / "output.log").is_file()
    assert not (run / "jobs" / "main" / "results" / "model").exists()  # the staged model is gone
    assert not (run / "performance" / "run_1" / "mlperf_log_trace.json").exists()  # LoadGen's trace: asked only


def test_accuracy_run_writes_the_reference_layout_and_scores_the_loadgen_log(cli, assets, tmp_path: Path):
    r = infer(cli, assets, tmp_path / "r", "--scenario", "Offline", "--time", "0.5", "--accuracy", "--trace")
    record = json.loads(r.out)
    run = tmp_path / "r" / record["run_id"]
    acc = record["result"]["accuracy"]
    assert acc["samples"] == tiny.IMAGES and acc["line"] == (run / "accuracy" / "accuracy.txt").read_text().strip()
    assert all((run / "accuracy" / name).is_file() for name in ("mlperf_log_accuracy.json", "mlperf_log_detail.txt"))
    assert acc["target_percent"] == pytest.approx(76.46 * 0.99)
    assert not acc["met"] and r.code == 1  # random weights
    assert any(reason.startswith("accuracy ") for reason in record["result"]["reasons"])
    profile = record["result"]["trace"]
    assert profile["source"] == "onnxruntime" and profile["operators"][0]["op"] in ("Conv", "Gemm", "Relu",
                                                                                    "GlobalAveragePool")
    assert (run / profile["file"]).is_file() and 0 <= profile["outside_model_share"] <= 1
    assert (run / "accuracy" / "mlperf_log_trace.json").stat().st_size > 0  # --trace asks for LoadGen's too
    # written through workloads.common.atomic: readable by others (the harness's own writer made 0600)
    written = [run / "accuracy" / "accuracy.txt", run / "jobs" / "main" / "results" / "harness.json"]
    assert [stat.S_IMODE(path.stat().st_mode) for path in written] == [0o644, 0o644]


def test_accuracy_only_runs_the_accuracy_test_alone_and_says_so(cli, assets, tmp_path: Path):
    """--accuracy is 'performance, then accuracy' here and 'accuracy only' in the reference: both offered."""
    r = infer(cli, assets, tmp_path / "r", "--scenario", "Offline", "--accuracy-only")
    assert r.code in (0, 1), r.err
    record = json.loads(r.out)
    run = tmp_path / "r" / record["run_id"]
    assert record["tests"] == ["accuracy"] and record["result"]["performance"] is None
    assert record["result"]["accuracy"]["samples"] == tiny.IMAGES and not (run / "performance").exists()
    assert "no performance test (--accuracy-only)" in record["result"]["reasons"]
    shown = cli("show", record["run_id"], "--results", str(tmp_path / "r"))
    assert "tests: accuracy only (--accuracy-only)" in shown.out and "accuracy/mlperf_log_summary.txt" in shown.out
    both = infer(cli, assets, tmp_path / "r", "--scenario", "Offline", "--time", "0.5", "--accuracy")
    assert json.loads(both.out)["tests"] == ["performance", "accuracy"]
    assert "tests: performance, then accuracy" in cli("show", json.loads(both.out)["run_id"], "--results",
                                                      str(tmp_path / "r")).out
    refused = infer(cli, assets, tmp_path / "r", "--accuracy", "--accuracy-only")
    assert refused.code == 2 and "--accuracy-only runs the accuracy test alone" in refused.err


def test_compliance_runs_the_models_audit_tests_and_verifies_them(cli, assets, tmp_path: Path):
    r = infer(cli, assets, tmp_path / "r", "--scenario", "Offline", "--time", "0.5", "--compliance")
    assert r.code in (0, 1), r.err
    record = json.loads(r.out)
    run = tmp_path / "r" / record["run_id"]
    tests = {t["test"]: t for t in record["result"]["compliance"]}
    assert set(tests) == {"TEST01", "TEST04"} and record["tests"] == ["performance", "accuracy"]  # TEST01 needs it
    assert tests["TEST01"]["accuracy_passed"] is True and tests["TEST04"]["accuracy_passed"] is None
    test01 = run / tests["TEST01"]["folder"]
    assert (test01 / "verify_accuracy.txt").read_text().endswith("TEST PASS\n")
    assert "accuracy_log_sampling_target = 4096" in (run / "jobs" / "TEST01" / "results" / "audit.config").read_text()
    assert (test01 / "accuracy" / "mlperf_log_accuracy.json").is_file()
    assert (run / tests["TEST04"]["folder"] / "verify_performance.txt").read_text().splitlines()[-1].startswith("TEST ")
    exported = cli("export", record["run_id"], "--results", str(tmp_path / "r"), "--mlcommons", str(tmp_path / "s"),
                   "--division", "closed", "--json")
    assert exported.code == 0, exported.err
    folder = Path(json.loads(exported.out)["folder"])
    assert json.loads(exported.out)["notes"][0].startswith(f"run {record['run_id']} is not a valid MLPerf result")
    assert (folder / "TEST01" / "accuracy" / "accuracy.txt").read_text().splitlines()[-1].startswith("hash=")
    assert (folder / "TEST04" / "performance" / "run_1" / "mlperf_log_summary.txt").is_file()


def test_multistream_runs_a_model_whose_batch_axis_is_fixed_at_one(cli, assets, tmp_path: Path):
    """8 samples per query, 8 calls (the reference's way); all 8 in one call failed with 'Got: 8 Expected: 1'."""
    fixed = tiny.export(tmp_path / "batch1.onnx", fixed_batch=1)
    r = infer(cli, (fixed, assets[1]), tmp_path / "r", "--scenario", "MultiStream", "--time", "0.5", "--accuracy")
    assert r.code in (0, 1), r.err
    result = json.loads(r.out)["result"]
    assert result["harness"]["max_batch"] == 1 and result["accuracy"]["samples"] == tiny.IMAGES


def test_a_model_with_the_wrong_input_shape_is_refused_before_anything_is_written(cli, assets, tmp_path: Path):
    wrong = tiny.export(tmp_path / "wrong.onnx", side=128)
    r = cli("infer", "resnet50", "--profile", "qualify", "--model", str(wrong), "--data", str(assets[1]),
            "--results", str(tmp_path / "r"))
    assert r.code == 2
    assert r.err.count("\n") == 1 and "shape [batch, 3, 128, 128]" in r.err and "[N, 3, 224, 224]" in r.err
    assert not (tmp_path / "r").exists()


def test_a_dataset_in_the_wrong_layout_is_refused_before_anything_is_written(cli, assets, tmp_path: Path):
    empty = tmp_path / "data"
    empty.mkdir()
    r = cli("infer", "resnet50", "--profile", "qualify", "--model", str(assets[0]), "--data", str(empty),
            "--results", str(tmp_path / "r"))
    assert r.code == 2 and r.err.count("\n") == 1 and "val_map.txt: missing" in r.err
    assert not (tmp_path / "r").exists()


def test_mlperf_profile_refuses_shortened_tests(cli, assets, tmp_path: Path):
    r = infer(cli, assets, tmp_path / "r", "--profile", "mlperf")
    assert r.code == 2 and "drop --time and --count" in r.err and not (tmp_path / "r").exists()


def test_list_show_compare_report_and_export_know_inference_runs(cli, assets, tmp_path: Path):
    results = tmp_path / "r"
    ids: dict[str, list[str]] = {"a": [], "b": []}
    for label, threads in (("a", "1"), ("b", "2"), ("a", "1"), ("b", "2")):
        r = infer(cli, assets, results, "--scenario", "Offline", "--time", "0.5", "--label", label,
                  "--threads", threads)
        assert r.code in (0, 1), r.err
        ids[label].append(json.loads(r.out)["run_id"])
    listed = json.loads(cli("list", "--results", str(results), "--json").out)
    assert {row["kind"] for row in listed} == {"inference"} and all(row["metric"] > 0 for row in listed)
    shown = cli("show", ids["a"][0], "--results", str(results))
    assert shown.code == 0 and "as an MLPerf result: INVALID" in shown.out
    assert "batch up to 32, 1 intra-op thread per call (given), 2 workers" in " ".join(shown.out.split())
    compared = cli("compare", "--label", "a", "--label", "b", "--results", str(results), "--json")
    assert compared.code == 0, compared.err
    rows = {row["setup"]: row for row in json.loads(compared.out)["rows"]}
    assert rows["a"]["runs"] == rows["b"]["runs"] == 2 and rows["a"]["ratio"] is None
    assert rows["b"]["ratio"] > 0 and rows["b"]["ci_low"] is not None and rows["b"]["ratio_low"] is not None
    assert rows["a"]["harness"]["threads"] == "1 (given)" and rows["b"]["harness"]["threads"] == "2 (given)"
    assert rows["a"]["harness"]["workers"] == rows["b"]["harness"]["workers"] == "2 (auto)"
    table = cli("compare", "--label", "a", "--label", "b", "--results", str(results))
    said = " ".join(table.out.split())
    assert "the harness ran the setups differently" in said and "threads differs: a 1 (given); b 2 (given)" in said
    report = cli("report", "--label", "a", "--label", "b", "--results", str(results), "--out", str(tmp_path / "r.html"))
    assert report.code == 0 and "samples per second" in (tmp_path / "r.html").read_text()
    exported = cli("export", ids["a"][0], "--results", str(results), "--mlcommons", str(tmp_path / "sub"), "--json")
    written = json.loads(exported.out)
    folder = Path(written["folder"])
    assert folder.parts[-6:] == ("open", "mltrain", "results", folder.parts[-3], "resnet", "Offline")  # the checker's
    assert (folder / "performance" / "run_1" / "mlperf_log_detail.txt").is_file() and (folder / "user.conf").is_file()
    system = json.loads(Path(written["system_file"]).read_text())
    assert system["division"] == "open" and system["status"] == "rdi" and system["system_type"] == "datacenter"
    assert all(system[field] for field in ("host_networking", "cooling", "accelerator_interconnect"))
    assert set(json.loads((folder / "measurements.json").read_text())) >= {
        "input_data_types", "retraining", "starting_weights_filename", "weight_data_types", "weight_transformations"}
    assert (folder.parents[3] / "src" / "README.md").is_file() and (folder / "README.md").is_file()


def test_a_torch_program_is_refused_unread_unless_its_user_vouches_for_it(cli, assets, tmp_path: Path):
    """torch.export.load runs code a .pt2 carries (pickles, sympy's eval of its shape expressions):
    mltrain and the harness refuse the file before anything reads it, unless --trust-model."""
    ran = tmp_path / "code-ran"
    evil = tiny.program(tmp_path / "evil.pt2", runs=f"open({str(ran)!r}, 'w').close()")
    r = cli("infer", "resnet50", "--backend", "torch", "--model", str(evil), "--data", str(assets[1]),
            "--results", str(tmp_path / "r"))
    assert r.code == 2 and r.err.count("\n") == 1 and "--trust-model" in r.err, r.err
    assert not ran.exists() and not (tmp_path / "r").exists()
    harness = subprocess.run(
        [sys.executable, "-m", "workloads.inference", "--model-name", "resnet50", "--backend", "torch",
         "--model", str(evil), "--data", str(assets[1]), "--out", str(tmp_path / "out"), "--count", "4"],
        cwd=PROJECT, capture_output=True, text=True, timeout=120)
    assert harness.returncode == 2 and "--trust-model" in harness.stderr and not ran.exists(), harness.stderr

    made = tiny.program(tmp_path / "made.pt2")
    r = infer(cli, (made, assets[1]), tmp_path / "r", "--backend", "torch", "--trust-model", "--time", "0.2")
    assert r.code in (0, 1), r.err
    assert json.loads(r.out)["result"]["harness"]["backend"] == "torch"


@pytest.mark.parametrize("fault", ["missing", "unreadable"])
def test_a_bad_image_past_the_first_fifty_is_bad_input_never_a_crash(cli, assets, tmp_path: Path, fault: str):
    """A listed image that is not there is found before anything runs; one that cannot be decoded is
    found when LoadGen loads it, inside its callback: exit 2 naming the image, no run kept (it was a
    SIGSEGV: an exception cannot unwind through LoadGen)."""
    data = tiny.dataset(tmp_path / "data", images=60)
    bad = data / "img_055.jpg"
    if fault == "missing":
        bad.unlink()
    else:
        bad.write_bytes(b"not a jpeg")
    r = cli("infer", "resnet50", "--profile", "qualify", "--model", str(assets[0]), "--data", str(data),
            "--results", str(tmp_path / "r"), "--count", "60", "--time", "0.2")
    assert r.code == 2, r.err
    said = "missing image listed in val_map.txt" if fault == "missing" else "cannot read this image"
    last = r.err.strip().splitlines()[-1]
    assert last.startswith("error: ") and last.endswith(f"{bad}: {said}"), r.err
    assert "signal" not in r.err and {p.name for p in (tmp_path / "r").glob("*")} <= {"index.db", "index.db-journal"}


def test_a_target_whose_schedule_exceeds_this_machine_is_refused_before_the_warm_up(cli, assets, tmp_path: Path):
    """Within the options' bounds, LoadGen would still hold 1e7 x 86,400 x 1.1 samples (about 350 TiB):
    the harness refuses it with the range that fits here, exit 2, no run kept."""
    r = infer(cli, assets, tmp_path / "r", "--target-qps", "1e7", "--time", "86400")
    assert r.code == 2 and r.err.count("\n") >= 1, r.err
    last = r.err.strip().splitlines()[-1]
    assert "LoadGen would hold 950,400,000,000 samples" in last and "give --target-qps from 0.001 to" in last
    assert {p.name for p in (tmp_path / "r").glob("*")} <= {"index.db", "index.db-journal"}


def test_the_auto_target_is_the_sustained_rate_and_a_test_that_will_run_long_is_said(cli, assets, tmp_path: Path):
    """A "60 s" qualify test once ran 662 s: its auto target was twice a rate measured on one small
    batch. The warm-up now runs the test's own path; the test ends near its duration. A target the
    machine cannot meet is said before the test starts."""
    r = infer(cli, assets, tmp_path / "r", "--time", "2", "--target-qps", "auto")
    assert r.code in (0, 1), r.err
    harness = json.loads(r.out)["result"]["harness"]
    assert harness["user_conf_sources"]["target_qps"].startswith("auto: 1.25 x the warm-up's sustained throughput")
    run = tmp_path / "r" / json.loads(r.out)["run_id"]
    test_s = json.loads((run / "jobs" / "main" / "results" / "harness.json").read_text())["tests"]["performance"]
    assert test_s["test_s"] < 2 * 2, test_s  # 1.4 x 2 s when the warm-up's rate holds
    assert "will run" not in r.err

    r = infer(cli, assets, tmp_path / "r", "--time", "0.001", "--target-qps", "1e6", "--count", "4")
    assert r.code in (0, 1), r.err
    assert "warning: the Offline test will run about" in r.err and "not 0.001 s: LoadGen planned 1,100 samples" in r.err


def test_a_model_the_harness_refuses_is_named_as_given_not_as_its_staged_copy(cli, assets, tmp_path: Path):
    """A file that passes the ONNX checks but ONNX Runtime cannot load (an operator it does not know)."""
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("NoSuchOperator", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 224, 224])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 1001])])
    model = tmp_path / "odd.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(model))
    r = infer(cli, (model, assets[1]), tmp_path / "r")
    assert r.code == 2, r.err
    last = r.err.strip().splitlines()[-1]
    assert last.startswith(f"error: --model {model}: ONNX Runtime cannot load it") and "/model/odd.onnx" not in last


@pytest.mark.parametrize(("written", "said"), [
    ("\ufeff", None),  # an editor's UTF-8 with BOM: read as UTF-8
    ("\xff", "val_map.txt: the val_map.txt is not UTF-8 text (byte 0xff on line 1)"),
])
def test_a_val_map_with_a_bom_reads_and_one_not_utf8_is_named(cli, assets, tmp_path: Path, written: str,
                                                               said: str | None):
    data = tiny.dataset(tmp_path / "data")
    listing = data / "val_map.txt"
    raw = listing.read_bytes()
    listing.write_bytes((b"\xef\xbb\xbf" if written == "\ufeff" else b"\xff") + raw)
    r = infer(cli, (assets[0], data), tmp_path / "r", "--time", "0.2")
    if said is None:
        assert r.code in (0, 1), r.err
    else:
        assert r.code == 2 and said in r.err and "Traceback" not in r.err, r.err


@pytest.mark.parametrize(("kind", "said"), [
    ("fifo", "val_map.txt: the val_map.txt: a FIFO, not a file"),  # never opened: it would block
    ("loop", "val_map.txt: the val_map.txt: a symbolic link loop, not a file"),
    ("image folder", "img_003.jpg: image listed in val_map.txt: a folder, not a file"),
])
def test_a_val_map_or_image_that_is_no_file_is_named_as_what_it_is_not_missing(cli, assets, tmp_path: Path,
                                                                                  kind: str, said: str):
    data = tiny.dataset(tmp_path / "data")
    listing = data / "val_map.txt"
    if kind == "image folder":
        (data / "img_003.jpg").unlink()
        (data / "img_003.jpg").mkdir()
    else:
        listing.unlink()
        os.mkfifo(listing) if kind == "fifo" else listing.symlink_to(listing)
    r = infer(cli, (assets[0], data), tmp_path / "r", "--time", "0.2")
    assert r.code == 2 and r.err.strip().splitlines() == [f"error: resnet50 data in {data}: {data}/{said}"], r.err


def test_the_reference_accuracy_off_the_cpu_is_the_file_s_own_on_the_cpu(cli, assets, tmp_path: Path):
    """Where the run's device is not the CPU, the model file's own FP32 accuracy (what a smoke target is
    a fraction of) is computed again on the CPU by the file's runtime, sample by sample: on the same
    samples it equals the accuracy run's."""
    from workloads.inference.models import find
    from workloads.inference.run import Options, reference_accuracy

    r = infer(cli, assets, tmp_path / "r", "--scenario", "Offline", "--time", "0.3", "--accuracy-only")
    assert r.code in (0, 1), r.err
    measured = json.loads(r.out)["result"]["accuracy"]
    model_file, data = assets
    options = Options(model_name="resnet50", model=model_file, data=data, out=tmp_path / "out", scenario="Offline",
                      device="cuda")
    model = find("resnet50").Model(data, count=tiny.IMAGES)
    own = reference_accuracy(options, model, None, [(i, b"") for i in range(tiny.IMAGES)])
    assert own["samples"] == measured["samples"] == tiny.IMAGES
    assert own["line"] == measured["line"] and "onnxruntime on the CPU, FP32" in own["how"]


def terminated() -> None:
    """SIGTERM (not SIGINT: a test run in the background has SIGINT ignored, and mltrain keeps it so)."""
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(1)  # the handler raises here


@pytest.mark.parametrize("stop", [terminated, terminated_while_pydantic_builds_a_validator])
def test_a_stopped_inference_run_is_recorded_interrupted(cli, assets, tmp_path: Path, monkeypatch, stop):
    """A SIGTERM that pydantic made its own error left the run 'running' for good, exit code 1."""
    from orchestrator.inference import session

    monkeypatch.setattr(session, "measure", lambda *_: stop())
    results = tmp_path / "r"
    r = infer(cli, assets, results)
    assert r.code == 143, r.err
    assert r.err.strip().splitlines()[-1] == "error: interrupted by SIGTERM"
    (run_id,) = [entry.name for entry in results.iterdir() if Store(results).is_inference(entry.name)]
    assert Store(results).open_inference(run_id).state == "interrupted"


def test_an_inference_run_an_internal_error_ended_is_recorded_failed_not_left_running(cli, assets, tmp_path: Path,
                                                                                      monkeypatch):
    from orchestrator.inference import session

    def broken(*_):
        raise RuntimeError("a bug")

    monkeypatch.setattr(session, "measure", broken)
    results = tmp_path / "r"
    r = infer(cli, assets, results)
    assert r.code == 1, r.err
    assert r.err.strip().splitlines()[-1] == "error: internal error: RuntimeError: a bug (run with -v for a traceback)"
    (run_id,) = [entry.name for entry in results.iterdir() if Store(results).is_inference(entry.name)]
    stored = Store(results).open_inference(run_id)
    assert (stored.state, stored.failure) == ("failed", "RuntimeError: a bug")
