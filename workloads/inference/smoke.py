"""The smoke model and data: what `mltrain infer resnet50 --profile smoke` runs on a fresh machine
(3d-unet's: `workloads.inference.kits19.smoke`).

The images are the resnet50 training workload's synthetic ImageNet-like set (``workloads.resnet50.
synthetic``), listed in the reference's ``val_map.txt``; the weights are what that workload's smoke
preset trains on them (``workloads.resnet50.train --save-weights``, about half a minute on two
cores); the model files are those weights behind the reference's input convention (RGB, the
reference's means subtracted, NCHW), exported to ONNX and as a ``torch.export`` program. The
trained model's own top-1 (what its training logged) is the 'FP32 reference' the 99% target is
taken of. Comparable with nothing: it proves the pipeline.

    OUT/data/val_map.txt, OUT/data/{train,val}/<wnid>/*.JPEG
    OUT/model.onnx, OUT/model.pt2, OUT/smoke.json (facts; written last, it marks OUT complete)
"""

from __future__ import annotations

import subprocess
import sys
import time
import warnings
from pathlib import Path

import torch
from torch import nn

from workloads.common.atomic import staged_folder, write_json
from workloads.common.mllog import last_eval_accuracy
from workloads.inference.errors import HarnessError
from workloads.inference.models.resnet50 import MEANS, NAME
from workloads.resnet50 import config as train_config
from workloads.resnet50.data_loader import MEAN_RGB, STD_RGB
from workloads.resnet50.layout import list_dataset
from workloads.resnet50.model import ModelConfig, ResNet50
from workloads.resnet50.synthetic import SyntheticSpec, synthesize

MARKER = "smoke.json"
SEED = 1
OPSET = 17


class ReferenceInput(nn.Module):
    """The trained network behind the reference's resnet50 input: ``x`` is RGB minus the reference's
    means; the network was trained on (RGB - mean) / std with the training workload's mean and std."""

    def __init__(self, network: nn.Module) -> None:
        super().__init__()
        self.network = network
        mean, std = torch.tensor(MEAN_RGB), torch.tensor(STD_RGB)
        self.register_buffer("scale", (1.0 / std).view(1, 3, 1, 1))
        self.register_buffer("shift", ((torch.from_numpy(MEANS) - mean) / std).view(1, 3, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: (B, 3, H, W), RGB minus the reference's means
        return self.network(x * self.scale + self.shift)  # (B, classes) logits


def write_val_map(data: Path) -> int:
    train, val = list_dataset(data)
    lines = [f"{path.relative_to(data).as_posix()} {label}" for path, label in val.samples]
    (data / "val_map.txt").write_text("\n".join(lines) + "\n")
    return len(lines)


def train(data: Path, weights: Path, log_dir: Path) -> float:
    """Train with the resnet50 workload's smoke preset; its last logged top-1 (the 'FP32 reference')."""
    log_dir.mkdir()
    command = [sys.executable, "-m", "workloads.resnet50.train", "--data", str(data), "--seed", str(SEED),
               "--preset", "smoke", "--results", str(log_dir), "--save-weights", str(weights)]
    done = subprocess.run(command, stdout=sys.stderr, check=False)
    if done.returncode != 0 or not weights.is_file():
        raise HarnessError(f"training the smoke model failed (exit {done.returncode}): {' '.join(command)}")
    accuracy = last_eval_accuracy(log_dir.iterdir())
    if accuracy is None:
        raise HarnessError(f"training the smoke model logged no eval_accuracy in {log_dir}")
    return accuracy


def export(weights: Path, classes: int, out: Path) -> tuple[int, int]:
    """model.onnx and model.pt2 in ``out``; the input side they take."""
    preset = train_config.smoke()
    network = ResNet50(ModelConfig(num_classes=classes, width=preset.width, layers=preset.layers))
    network.load_state_dict(torch.load(weights, map_location="cpu"))
    model = ReferenceInput(network).eval()
    example = torch.zeros(2, 3, preset.crop, preset.crop)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript-based exporter is deprecated; onnxscript is not needed
        torch.onnx.export(model, (example,), str(out / "model.onnx"), dynamo=False, opset_version=OPSET,
                          input_names=["input_tensor"], output_names=["logits"],
                          dynamic_axes={"input_tensor": {0: "batch"}, "logits": {0: "batch"}})
    batch = torch.export.Dim("batch", min=1, max=4096)
    program = torch.export.export(model, (example,), dynamic_shapes={"x": {0: batch}})
    torch.export.save(program, str(out / "model.pt2"))
    return preset.crop, preset.crop


def make(out: Path, *, with_model: bool = True) -> bool:
    """Make the smoke assets in ``out`` atomically; False when they are already there. The model is
    always made with its data (``with_model`` is for a model whose data is also a training run's:
    3d-unet)."""
    if (out / MARKER).is_file():
        return False
    if out.exists() and any(out.iterdir()):
        raise HarnessError(f"{out}: exists and is not a smoke folder; choose an empty or new folder")
    with staged_folder(out) as staging:
        started = time.monotonic()
        spec = SyntheticSpec()
        synthesize(spec, staging / "data")
        samples = write_val_map(staging / "data")
        reference = train(staging / "data", staging / "weights.pt", staging / "training")
        trained = time.monotonic() - started
        height, width = export(staging / "weights.pt", spec.classes, staging)
        facts = {"model": NAME, "classes": spec.classes, "samples": samples, "reference_top1": reference,
                 "input_shape": [3, height, width], "harness_args": ["--image-size", f"{height},{width}",
                                                                      "--label-offset", "0"],
                 "seed": SEED, "seconds": round(time.monotonic() - started, 1), "train_seconds": round(trained, 1),
                 "torch": torch.__version__, "opset": OPSET}
        write_json(staging / MARKER, facts)
    return True
