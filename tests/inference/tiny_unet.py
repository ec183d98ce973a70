"""A random-weights 3D U-Net (filters 2, 4) kept as a training seed and exported as `mltrain export`
writes it, its window given: the model the 3D-UNet inference tests run."""

from __future__ import annotations

from pathlib import Path

import torch

from workloads.unet3d.export import export, save
from workloads.unet3d.model import UNet3D, UNet3DConfig


def exported_unet(folder: Path, window: tuple[int, int, int], name: str = "model.onnx") -> Path:
    """``folder/seed`` (the seed's checkpoint) and ``folder/name``, its ONNX file, returned."""
    torch.manual_seed(0)
    network = UNet3D(UNet3DConfig(filters=(2, 4))).eval()
    (folder / "seed").mkdir()
    save(network, network.config, window, folder / "seed", {"status": "success"})
    export(folder / "seed", folder / name)
    return folder / name
