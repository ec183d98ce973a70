"""The unet3d smoke profile's data, knobs and target as code reads them (seeds.yaml's unet3d smoke
profile; a test holds them equal): for a smoke model trained outside a run (the inference harness's
3d-unet smoke model)."""

from __future__ import annotations

SMOKE_DATA = {"cases": 40, "eval_cases": 10, "size": "24,24,24", "min_shape": 24, "seed": 0}
"""The smoke profile's synthetic dataset (seeds.yaml's unet3d smoke ``dataset.args``; a test holds them equal)."""
SMOKE_ENV = {"FILTERS": "8,16,32", "INPUT_SHAPE": "24,24,24", "BATCH_SIZE": "2", "LEARNING_RATE": "1.0",
             "LR_WARMUP_EPOCHS": "2", "START_EVAL_AT": "4", "EVALUATE_EVERY": "1", "MAX_EPOCHS": "40"}
"""The smoke profile's model and schedule knobs (seeds.yaml's unet3d smoke ``env``), for a smoke model
trained outside a run (the inference harness's 3d-unet smoke model)."""
SMOKE_TARGET = 0.7
"""The smoke profile's quality target (seeds.yaml's unet3d smoke ``target``)."""


def smoke_data_args() -> list[str]:
    """``SMOKE_DATA`` as the dataset command line's ``synthesize`` arguments."""
    return [arg for key, value in SMOKE_DATA.items() for arg in (f"--{key.replace('_', '-')}", str(value))]
