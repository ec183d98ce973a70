"""The one importer of MLCommons' reference code (workloads/common/mlcommons.py, and through it
workloads/unet3d/reference.py), on a folder laid out as the training reference's unet3d: its modules
imported as they are, with stand-ins for what a current stack lacks; a folder that is not it refused."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from workloads.unet3d import reference

FILES = {
    "model/unet3d.py": "import dllogger\nfrom tqdm import tqdm\nimport torch\n\n"
                       "class Unet3D(torch.nn.Module):\n    def __init__(self, *a, **k):\n        super().__init__()\n"
                       "        self.conv = torch.nn.Conv3d(1, 3, 3)\n",
    "model/losses.py": "class DiceCELoss:\n    pass\n\n\nclass DiceScore:\n    pass\n",
    "runtime/inference.py": "from scipy import signal\n\n\ndef sliding_window_inference(**kwargs):\n"
                            "    return signal.gaussian(5, 1.0)\n",
    "runtime/distributed_utils.py": "def reduce_tensor(tensor, n):\n    return tensor\n",
}


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A reference-shaped folder; what importing it adds to sys.path and sys.modules undone after."""
    for name, text in FILES.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    monkeypatch.setattr(sys, "path", list(sys.path))
    before = set(sys.modules)
    yield tmp_path
    for name in set(sys.modules) - before:
        if name.split(".")[0] in ("model", "runtime", "dllogger", "tqdm"):
            del sys.modules[name]


def test_the_references_pieces_are_imported_from_its_folder(folder: Path):
    ref = reference.import_reference(folder)
    assert ref.unet3d.__name__ == "Unet3D" and ref.dice_ce_loss.__name__ == "DiceCELoss"
    assert ref.dice_score.__name__ == "DiceScore" and ref.reduce_tensor(3, 1) == 3
    assert len(ref.sliding_window_inference()) == 5  # scipy.signal.gaussian, wherever SciPy keeps it
    assert Path(sys.modules["model.unet3d"].__file__).parent.parent == folder


def test_a_folder_that_is_not_the_reference_is_refused(tmp_path: Path):
    with pytest.raises(reference.NotTheReference, match="expected model/unet3d.py and runtime/inference.py"):
        reference.import_reference(tmp_path)


def test_weights_are_copied_only_into_a_model_of_the_same_parameters():
    ours, theirs = torch.nn.Conv3d(1, 3, 3), torch.nn.Conv3d(1, 3, 3)
    reference.copy_weights(ours, theirs)
    assert torch.equal(ours.weight, theirs.weight) and torch.equal(ours.bias, theirs.bias)
    with pytest.raises(reference.NotTheReference, match="parameter for parameter"):
        reference.copy_weights(ours, torch.nn.Conv3d(1, 2, 3))
