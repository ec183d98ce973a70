"""The clock starts before any part of the system touches the dataset: no dataset file is opened
before run_start (audited with sys.addaudithook in a subprocess running the trainer)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

PROJECT = Path(__file__).resolve().parents[2]

AUDITED_RUN = r"""
import json, os, sys

data, report, *argv = sys.argv[1:]
root = os.path.realpath(data)
events = []

def inside(path):
    if isinstance(path, int):
        return False
    try:
        return os.path.realpath(os.fsdecode(path)).startswith(root + os.sep)
    except (TypeError, ValueError):
        return False

def hook(event, args):
    if event == "open" and inside(args[0]):
        events.append(["open", os.path.basename(os.fsdecode(args[0]))])
    elif event in ("os.listdir", "os.scandir") and args and args[0] is not None and \
            os.path.realpath(os.fsdecode(args[0])) == root:
        events.append(["list", None])

from workloads.common import mllog
from workloads.unet3d import train

original_start = mllog.MlperfLog.start

def start(self, key, value=None, metadata=None):
    if key == "run_start":
        events.append(["run_start", None])
    original_start(self, key, value, metadata)

mllog.MlperfLog.start = start
sys.addaudithook(hook)
code = train.main(argv)
with open(report, "w") as handle:
    json.dump({"code": code, "events": events}, handle)
"""


@pytest.fixture(scope="module")
def tiny_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("unet3d_audit") / "data"
    subprocess.run(
        [sys.executable, "-m", "workloads.unet3d.dataset", "synthesize", str(out), "--cases", "6",
         "--size", "16,16,16", "--min-shape", "16", "--seed", "0", "--workers", "1", "--eval-cases", "2"],
        cwd=PROJECT, check=True, capture_output=True,
    )
    return out


def test_no_dataset_file_is_opened_before_run_start(tiny_data: Path, tmp_path: Path):
    report = tmp_path / "report.json"
    argv = ["--data-dir", str(tiny_data), "--results-dir", str(tmp_path / "r"), "--filters", "4,8",
            "--input-shape", "16", "--batch-size", "2", "--lr-warmup-epochs", "1", "--max-epochs", "1",
            "--start-eval-at", "1", "--evaluate-every", "1", "--threads", "1", "--num-workers", "0", "--seed", "1"]
    done = subprocess.run([sys.executable, "-c", AUDITED_RUN, str(tiny_data), str(report), *argv], cwd=PROJECT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(report.read_text())
    assert result["code"] == 0
    kinds = [kind for kind, _ in result["events"]]
    assert kinds.count("run_start") == 1
    before = result["events"][: kinds.index("run_start")]
    after = result["events"][kinds.index("run_start") + 1:]
    assert [name for kind, name in before if kind == "open"] == [], before
    assert ["list", None] in before  # names may be listed before the clock starts
    opened = {name for kind, name in after if kind == "open"}
    assert "split.json" in opened and any(n.endswith("_x.npy") for n in opened) and any(
        n.endswith("_y.npy") for n in opened)  # the audit sees the reads that do happen, after run_start
