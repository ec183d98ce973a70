"""Shared fixtures of the resnet50 tests: tiny synthetic datasets and a tiny training config."""

from __future__ import annotations

from pathlib import Path

import pytest

from workloads.resnet50.config import TrainConfig, smoke, with_overrides
from workloads.resnet50.synthetic import SyntheticSpec, synthesize

TINY_SPEC = SyntheticSpec(classes=4, train_per_class=24, val_per_class=20, size=20, mislabeled=0.05)
"""Small enough to write in well under a second; val accuracy can reach 0.95 at most."""

TINY_SETTINGS = [
    "width=8", "layers=1,1,1,1", "crop=16", "eval_resize=18", "batch_size=16", "eval_batch_size=40",
    "workers=0", "threads=1", "base_lr=2.0", "warmup_epochs=1", "decay_epochs=5", "max_epochs=6",
    "eval_every=1", "eval_offset=0", "precision=fp32",
]
"""A config that learns TINY_SPEC in a few seconds on one CPU thread, in fp32 on every CPU: ``auto`` is bf16
where the CPU runs it natively (AMX, AVX-512 BF16), and the tiny net's 6 epochs then fall short of the
target on some seeds (seen on an AMX Xeon), while an AVX2-only CPU resolved fp32 and converged."""


def tiny_config(*extra: str) -> TrainConfig:
    return with_overrides(smoke(), [*TINY_SETTINGS, *extra])


@pytest.fixture(scope="session")
def tiny_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A read-only tiny dataset shared by the tests that only read it."""
    out = tmp_path_factory.mktemp("r50data") / "tiny"
    synthesize(TINY_SPEC, out)
    return out


@pytest.fixture
def own_dataset(tmp_path: Path) -> Path:
    """A tiny dataset this test may damage."""
    out = tmp_path / "tiny"
    synthesize(TINY_SPEC, out)
    return out
