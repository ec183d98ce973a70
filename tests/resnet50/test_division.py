"""Division labels: closed only at an RCP point with every fixed value, ImageNet and a random seed."""

from __future__ import annotations

import pytest

from workloads.resnet50.config import build, smoke
from workloads.resnet50.division import decide

IMAGENET = {"train_images": 1_281_167, "classes": 1000}


@pytest.mark.parametrize(("processes", "per_process"), [(8, 408), (4, 408), (8, 512), (16, 512)])
def test_closed_preset_at_an_rcp_point_with_a_random_seed_is_closed(processes, per_process):
    config = build("closed", processes, [f"batch_size={per_process}"])
    division = decide(config, global_batch=per_process * processes, seed_random=True, **IMAGENET)
    assert (division.label, division.reason) == ("closed", "")


def test_a_fixed_seed_makes_it_open():
    division = decide(build("closed", 8, []), global_batch=3264, seed_random=False, **IMAGENET)
    assert division.label == "open" and division.reason == "seed fixed by the caller"


def test_one_process_at_batch_408_has_no_rcp():
    division = decide(build("closed", 1, []), global_batch=408, seed_random=True, **IMAGENET)
    assert division.label == "open"
    assert division.reason.startswith("no RCP for global batch 408 in the 4.0.0 tables (they hold 1632, 3264")
    assert "hyperparameters of 1632 used" in division.reason


def test_a_changed_hyperparameter_or_model_is_named():
    config = build("closed", 8, ["base_lr=9.0", "width=32"])
    division = decide(config, global_batch=3264, seed_random=True, **IMAGENET)
    assert division.label == "open"
    assert "width 32 differs from the reference 64" in division.reason
    assert "base_lr 9.0 differs from the reference 10.5" in division.reason
    decay = build("closed", 8, ["decay_epochs=30"])
    assert "decay steps 11775 differ from the reference 14523" in decide(
        decay, global_batch=3264, seed_random=True, **IMAGENET).reason


def test_smoke_is_open_with_its_reasons_and_the_environment_can_force_open_only():
    division = decide(smoke(), global_batch=64, train_images=640, classes=10, seed_random=True)
    assert division.label == "open"
    assert "hyperparameters of" not in division.reason  # the smoke preset's own are used
    for fragment in ("no RCP for global batch 64", "width 16 differs from the reference 64", " ...",
                     "dataset is not ImageNet 2012 (640 training images in 10 classes)"):
        assert fragment in division.reason
    forced = decide(build("closed", 8, []), global_batch=3264, seed_random=True, force_open=True, **IMAGENET)
    assert (forced.label, forced.reason) == ("open", "SUBMISSION_DIVISION=open")
