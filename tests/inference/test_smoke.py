"""`mltrain infer resnet50 --profile smoke` on a fresh cache: the smoke model is trained by the
resnet50 workload and exported once, then the run's accuracy equals a top-1 counted here from the
ONNX model's own outputs (not through the harness), and every class in LoadGen's accuracy log is
the model's argmax for that sample."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import cv2
import numpy as np
import onnxruntime as ort
import pytest

pytestmark = pytest.mark.slow

REFERENCE_MEANS = np.array([123.68, 116.78, 103.94], dtype=np.float32)


def top1_by_hand(folder: Path) -> tuple[np.ndarray, np.ndarray]:
    """(predicted class, label) per val_map.txt line: the reference's resnet50 preprocessing done here
    with OpenCV (shorter side to side / 0.875 with INTER_AREA, centre crop, means off, NCHW)."""
    session = ort.InferenceSession(str(folder / "model.onnx"), providers=["CPUExecutionProvider"])
    side = session.get_inputs()[0].shape[2]
    predictions, labels = [], []
    for line in (folder / "data" / "val_map.txt").read_text().split("\n"):
        if not line:
            continue
        name, label = line.split()
        image = cv2.cvtColor(cv2.imread(str(folder / "data" / name)), cv2.COLOR_BGR2RGB)
        h, w = image.shape[:2]
        short = int(side / 0.875)
        size = (short, int(short * h / w)) if h > w else (int(short * w / h), short)
        image = cv2.resize(image, size, interpolation=cv2.INTER_AREA)
        top, left = (image.shape[0] - side) // 2, (image.shape[1] - side) // 2
        x = (image[top:top + side, left:left + side].astype(np.float32) - REFERENCE_MEANS).transpose(2, 0, 1)
        logits = session.run(None, {session.get_inputs()[0].name: x[None]})[0]
        predictions.append(int(logits.argmax()))
        labels.append(int(label))
    return np.array(predictions), np.array(labels)


def test_smoke_profile_accuracy_is_the_top1_counted_from_the_model_outputs(cli, mltrain_env, tmp_path: Path):
    results = tmp_path / "r"
    started = time.monotonic()
    r = cli("infer", "resnet50", "--profile", "smoke", "--results", str(results), "--json")
    first_s = time.monotonic() - started
    assert r.code == 0, r.err
    record = json.loads(r.out)
    smoke = Path(mltrain_env["XDG_CACHE_HOME"]) / "mltrain" / "data" / "inference" / "resnet50-smoke"
    made = re.search(r"smoke resnet50 model and data made in ([0-9.]+) s \(training included\)", r.err)
    assert made and float(made.group(1)) >= json.loads((smoke / "smoke.json").read_text())["train_seconds"], r.err
    predicted, labels = top1_by_hand(smoke)
    good = int((predicted == labels).sum())
    accuracy = record["result"]["accuracy"]
    assert accuracy["line"] == f"accuracy={100.0 * good / len(labels):.3f}%, good={good}, total={len(labels)}"
    # the target: 99% of the model file's own FP32 top-1 on the same images (on the CPU: this very run's)
    assert accuracy["met"] and accuracy["target_percent"] == pytest.approx(0.99 * accuracy["percent"], rel=1e-4)
    log = json.loads((results / record["run_id"] / "accuracy" / "mlperf_log_accuracy.json").read_text())
    assert {e["qsl_idx"] for e in log} == set(range(len(labels)))
    for entry in log:
        assert int(np.frombuffer(bytes.fromhex(entry["data"]), np.float32)[0]) == predicted[entry["qsl_idx"]]
    assert "the smoke data with its smoke model" in " ".join(record["result"]["official_gaps"])
    assert not record["result"]["valid"]

    started = time.monotonic()
    again = cli("infer", "resnet50", "--profile", "smoke", "--backend", "torch", "--threads", "1",
                "--results", str(results), "--json")
    second_s = time.monotonic() - started
    assert again.code in (0, 1), again.err  # LoadGen's verdict on a 3 s test depends on the machine's load
    torch_run = json.loads(again.out)
    assert torch_run["result"]["harness"]["backend"] == "torch"
    assert torch_run["result"]["accuracy"]["percent"] == pytest.approx(accuracy["percent"], abs=1.0)
    assert second_s < 60, f"a smoke run with the model made took {second_s:.0f} s (first, training it: {first_s:.0f} s)"
    refused = cli("export", record["run_id"], "--results", str(results), "--mlcommons", str(tmp_path / "sub"))
    assert refused.code == 2 and "smoke run" in refused.err and not (tmp_path / "sub").exists()
