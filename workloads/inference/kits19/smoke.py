"""The 3d-unet smoke model and data: what `mltrain infer 3d-unet --profile smoke` runs on a fresh machine.

The data is the unet3d smoke profile's synthetic KiTS19 (``workloads.unet3d.smoke_profile.SMOKE_DATA``) kept
in its raw layout, which `prepare` turns into the inference cases for a model's window as it does
the real KiTS19 (the cases among the 43 of the reference's list that the synthetic set has). The
model is what the unet3d smoke recipe (``SMOKE_ENV``) trains on the same cases, exported as the
inference reference's ONNX and as a torch.export program; its own evaluation Dice is the 'FP32
reference' the target is a fraction of. Comparable with nothing: it proves the pipeline. A
training run's model (`--model RUN`) runs on the same data.

    OUT/raw/case_XXXXX/{imaging,segmentation}.nii.gz, OUT/raw/kits.json
    OUT/model.onnx, OUT/model.pt2, OUT/smoke.json (facts; written last, it marks OUT complete)
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from workloads.common import atomic
from workloads.common.atomic import staged_folder
from workloads.common.mllog import last_eval_accuracy
from workloads.inference.errors import HarnessError
from workloads.inference.kits19.preprocess import inference_cases
from workloads.unet3d.export import export
from workloads.unet3d.smoke_profile import SMOKE_DATA, SMOKE_ENV, SMOKE_TARGET, smoke_data_args
from workloads.unet3d.synthetic import parse_size
from workloads.unet3d.synthetic_raw import generate_raw

MARKER = "smoke.json"
SEED = 1
SMOKE_DATA_WORKERS = 1
"""The smoke set's 40 cases of 24^3 are made in this process (about a second of CPU): a worker process
would first import torch and scipy, seconds apiece, for less than a second of work."""


def train(staging: Path) -> tuple[Path, float]:
    """The unet3d smoke recipe trained on the smoke data, in ``staging`` (the smoke folder being made or
    completed): (its results folder, its last evaluation Dice)."""
    data, results = staging / ".train", staging / ".training"
    for folder in (data, results):
        shutil.rmtree(folder, ignore_errors=True)  # what an interrupted attempt left
    results.mkdir()
    commands = [[sys.executable, "-m", "workloads.unet3d.dataset", "synthesize", str(data), *smoke_data_args()],
                [sys.executable, "-m", "workloads.unet3d.train", "--data-dir", str(data), "--results-dir", str(results),
                 "--seed", str(SEED)]]
    env = {**os.environ, **SMOKE_ENV, "QUALITY_THRESHOLD": str(SMOKE_TARGET), "MLTRAIN_PROFILE": "smoke"}
    for command in commands:
        done = subprocess.run(command, stdout=sys.stderr, env=env, check=False)
        if done.returncode != 0:
            raise HarnessError(f"training the 3d-unet smoke model failed (exit {done.returncode}): {' '.join(command)}")
    dice = last_eval_accuracy([results / "unet3d.log"])
    if dice is None:
        raise HarnessError(f"training the 3d-unet smoke model logged no eval_accuracy in {results}")
    shutil.rmtree(data)
    return results, dice


def make(out: Path, *, with_model: bool = True) -> bool:
    """Make the smoke assets in ``out``, the data atomically (the folder appears whole), the model once
    asked for (``with_model``: a run on a training run's model needs only the data); False when what is
    asked for is there already."""
    marker = out / MARKER
    facts = json.loads(marker.read_text()) if marker.is_file() else None
    if facts is not None and (facts.get("model_files") or not with_model):
        return False
    if facts is None:
        if out.exists() and any(out.iterdir()):
            raise HarnessError(f"{out}: exists and is not a smoke folder; choose an empty or new folder")
        with staged_folder(out) as staging:
            started = time.monotonic()
            generate_raw(staging / "raw", int(SMOKE_DATA["cases"]), int(SMOKE_DATA["seed"]),
                         parse_size(str(SMOKE_DATA["size"])), workers=SMOKE_DATA_WORKERS)
            cases = [c for c in inference_cases() if (staging / "raw" / c).is_dir()]
            facts = {"model": "3d-unet", "data": "raw", "samples": len(cases), "data_args": SMOKE_DATA,
                     "model_files": False, "harness_args": [], "seconds": round(time.monotonic() - started, 1)}
            if with_model:
                facts.update(_model(staging))
            atomic.write_json(staging / MARKER, facts)
        return True
    facts.update(_model(out))  # the data is there: the model added, its facts written last
    atomic.write_json(marker, facts)
    return True


def _model(folder: Path) -> dict:
    """Train, export (model.onnx, model.pt2) and say what was made."""
    started = time.monotonic()
    results, dice = train(folder)
    written = export(results, folder / "model.onnx")
    export(results, folder / "model.pt2")
    shutil.rmtree(results)
    return {"model_files": True, "reference_accuracy": dice,
            "reference_metric": "mean Dice on its own evaluation cases", "input_shape": written["input"][1:],
            "seed": SEED, "train_seconds": round(time.monotonic() - started, 1), "recipe": SMOKE_ENV}
