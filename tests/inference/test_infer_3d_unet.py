"""`mltrain infer 3d-unet` on this CPU: a raw KiTS19 layout (synthetic cases) is preprocessed once by
the harness into mltrain's cache for the model's window, the real LoadGen runs the sliding window
through ONNX Runtime, and the accuracy run scores the reference's Dice."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from workloads.common.cpus import threads_per_process, usable_cpus
from workloads.unet3d.export import export, save
from workloads.unet3d.model import UNet3D, UNet3DConfig
from workloads.unet3d.synthetic import parse_size
from workloads.unet3d.synthetic_raw import generate_raw

pytestmark = pytest.mark.slow  # about 25 s: preparing the cases at 128^3, and a 128^3 window per case on 2 cores


@pytest.fixture(scope="module")
def assets(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A random-weights net at the reference's 128^3 window, and 7 raw cases (4 inference cases)."""
    folder = tmp_path_factory.mktemp("unet")
    torch.manual_seed(0)
    network = UNet3D(UNet3DConfig(filters=(2, 4))).eval()
    (folder / "seed").mkdir()
    save(network, network.config, (128, 128, 128), folder / "seed", {"status": "success"})
    export(folder / "seed", folder / "model.onnx")
    generate_raw(folder / "raw", 7, 0, parse_size("tiny"), workers=1)
    return folder / "model.onnx", folder / "raw"


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
    # the record says how many workers ran and why: a whole volume each on the CPU
    harness = result["harness"]
    assert harness["workers"] == 2 and harness["workers_source"].startswith("auto: two workers in flight, a whole")
    assert harness["threads"] == threads_per_process(usable_cpus(), 2)
