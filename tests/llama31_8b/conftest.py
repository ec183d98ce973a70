"""Shared fixtures of the llama31_8b tests: a tiny synthetic C4-layout dataset and a tiny model's settings."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

PROJECT = Path(__file__).resolve().parents[2]
TINY = ["vocab=16", "dim=32", "layers=2", "heads=4", "kv_heads=2", "ffn=64", "seq_len=32", "threads=1",
        "precision=fp32", "checkpointing=false"]
"""A model that runs a step in milliseconds on one CPU thread, in fp32 on every CPU."""


@pytest.fixture(scope="session")
def tiny_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """16 tokens, 1,200 training and 500 validation documents (about 44,000 validation tokens: the
    rules' 1,024 evaluation sequences of 33 tokens fit)."""
    out = tmp_path_factory.mktemp("llama31_8b") / "data"
    subprocess.run([sys.executable, "-m", "workloads.llama31_8b.dataset", "synthesize", str(out), "--vocab", "16",
                    "--train-documents", "1200", "--val-documents", "500"], cwd=PROJECT, check=True,
                   capture_output=True)
    return out
