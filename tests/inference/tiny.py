"""A tiny model and dataset in resnet50's inference layout, made in a second: random weights behind
the reference's input (N, 3, 224, 224), 1001 outputs; 24 small JPEGs listed in val_map.txt."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torch import nn

IMAGES = 24


def export(path: Path, side: int = 224, classes: int = 1001, fixed_batch: int | None = None) -> Path:
    """The model as ONNX; its batch axis free, or fixed at ``fixed_batch``."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 7, stride=8), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                          nn.Linear(8, classes)).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        axes = None if fixed_batch else {"input_tensor": {0: "batch"}, "logits": {0: "batch"}}
        torch.onnx.export(model, (torch.zeros(fixed_batch or 1, 3, side, side),), str(path), dynamo=False,
                          opset_version=17, input_names=["input_tensor"], output_names=["logits"], dynamic_axes=axes)
    return path


def dataset(folder: Path, images: int = IMAGES) -> Path:
    rng = np.random.default_rng(0)
    folder.mkdir(parents=True)
    lines = []
    for k in range(images):
        pixels = rng.integers(0, 256, size=(48 + k, 64, 3), dtype=np.uint8)
        Image.fromarray(pixels).save(folder / f"img_{k:03d}.jpg", quality=90)
        lines.append(f"img_{k:03d}.jpg {k % 4}")
    (folder / "val_map.txt").write_text("\n".join(lines) + "\n")
    return folder


def program(path: Path, side: int = 224, classes: int = 1001, runs: str | None = None) -> Path:
    """The tiny model as a torch.export program (.pt2), the batch axis free. With ``runs``, a file
    whose loading runs that Python expression: one shape expression of the program rewritten (no
    pickle in it), which torch.export.load hands to sympy's eval."""
    import zipfile

    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 7, stride=8), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                          nn.Linear(8, classes)).eval()
    batch = torch.export.Dim("batch", min=1, max=64)
    exported = torch.export.export(model, (torch.zeros(2, 3, side, side),), dynamic_shapes=({0: batch},))
    torch.export.save(exported, str(path))
    if runs is None:
        return path
    with zipfile.ZipFile(path) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    name = next(n for n in members if n.endswith("models/model.json"))
    text = members[name].decode()
    start = text.index("\"Symbol(")  # a shape expression of the free batch axis
    members[name] = (text[:start + 1] + f"({runs}) or " + text[start + 1:]).encode()
    with zipfile.ZipFile(path, "w") as archive:
        for member, data in members.items():
            archive.writestr(member, data)
    return path
