"""`mltrain infer 3d-unet` on this CPU: a raw KiTS19 layout (synthetic cases) is preprocessed once by
the harness into mltrain's cache for the model's window, the real LoadGen runs the sliding window
through ONNX Runtime, and the accuracy run scores the reference's Dice."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import PROJECT
from tests.inference.tiny_unet import exported_unet
from workloads.common.cpus import threads_per_process, usable_cpus
from workloads.inference.kits19.prepare import prepare
from workloads.unet3d.synthetic import parse_size
from workloads.unet3d.synthetic_raw import generate_raw

pytestmark = pytest.mark.slow  # about 25 s: preparing the cases at 128^3, and a 128^3 window per case on 2 cores


@pytest.fixture(scope="module")
def assets(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A random-weights net at the reference's 128^3 window, and 7 raw cases (4 inference cases)."""
    folder = tmp_path_factory.mktemp("unet")
    model = exported_unet(folder, (128, 128, 128))
    generate_raw(folder / "raw", 7, 0, parse_size("tiny"), workers=1)
    return model, folder / "raw"


def test_offline_from_raw_kits19_with_the_accuracy_run(cli, mltrain_env, assets, tmp_path: Path):
    model, raw = assets
    r = cli("infer", "3d-unet", "--profile", "qualify", "--model", str(model), "--data", str(raw), "--scenario",
            "Offline", "--time", "0.5", "--count", "4", "--accuracy", "--results", str(tmp_path / "r"), "--json")
    assert r.code in (0, 1), r.err
    record = json.loads(r.out)
    result = record["result"]
    accuracy = result["accuracy"]
    assert accuracy["metric"] == "DICE" and accuracy["samples"] == 4
    assert accuracy["line"].startswith("Accuracy: mean = ")
    assert accuracy["target_percent"] == pytest.approx(86.331 * 0.999)
    prepared = Path(record["data_dir"])
    cache = Path(mltrain_env["XDG_CACHE_HOME"]) / "mltrain" / "data" / "inference" / "prepared"
    assert prepared.parent == cache and (prepared / "index.json").is_file()
    gaps = " ".join(result["official_gaps"])
    assert "accuracy over 4 samples, not the 43 of KiTS19 inference cases" in gaps
    assert "not the real KiTS19" in gaps and not result["valid"]
    # the record says how many workers ran and why: one on the CPU, a whole volume at a time, on every CPU
    harness = result["harness"]
    assert harness["workers"] == 1 and harness["workers_source"].startswith("auto: one worker, a whole volume")
    assert harness["threads"] == threads_per_process(usable_cpus(), 1)


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A random-weights net at a 24^3 window as ONNX, and the 4 inference cases of 7 raw ones prepared for it."""
    folder = tmp_path_factory.mktemp("small")
    model = exported_unet(folder, (24, 24, 24))
    generate_raw(folder / "raw", 7, 0, parse_size("tiny"), workers=1)
    return model, prepare(folder / "raw", folder / "cache", roi=(24, 24, 24), workers=1).folder


HARNESS_THEN_TORCH_MODULES = """
import sys
from workloads.inference.__main__ import main
code = main(sys.argv[1:])
print(code, ",".join(sorted(m for m in sys.modules if m == "torch" or m.startswith("torch."))))
"""


def test_the_harness_on_onnx_runtime_never_imports_torch(small: tuple[Path, Path], tmp_path: Path):
    """The reference runs its sliding window in NumPy and never imports torch; nor does the harness on ONNX
    Runtime, warm-up, performance and accuracy tests included (before: the windows ran through the training
    workload's torch sliding window, about 100 MiB of the peak memory of one worker and a second of import)."""
    model, data = small
    out = tmp_path / "out"
    argv = ["--model-name", "3d-unet", "--model", str(model), "--data", str(data), "--out", str(out),
            "--scenario", "Offline", "--mode", "both", "--time", "0.5", "--count", "2", "--target-qps", "1"]
    done = subprocess.run([sys.executable, "-c", HARNESS_THEN_TORCH_MODULES, *argv], capture_output=True, text=True,
                          cwd=PROJECT, check=False)
    assert done.returncode == 0, done.stderr
    code, _, loaded = done.stdout.strip().splitlines()[-1].partition(" ")
    assert code == "0", done.stderr
    assert (out / "accuracy" / "accuracy.txt").read_text().startswith("Accuracy: mean = ")  # the volumes were answered
    assert loaded == "", f"the harness imported {loaded[:300]}"
