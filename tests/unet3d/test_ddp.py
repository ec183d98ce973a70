"""DDP on one node over gloo: two processes with one sample each take the same step as one process
with both samples (the gradient all-reduce averages exactly what the batch mean would)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import torch

from tests.unet3d import ddp_steps
from workloads.common.distributed import Context

PROJECT = Path(__file__).resolve().parents[2]


def test_two_gloo_processes_step_like_one_process_with_the_whole_batch(tmp_path: Path):
    out = tmp_path / "ddp.pt"
    env = {"PYTHONPATH": str(PROJECT), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                           str(Path(ddp_steps.__file__)), str(out)], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    ddp = torch.load(out)

    whole = ddp_steps.one_step(Context(), slice(0, 2))  # one process, both samples
    assert set(ddp) == set(whole)
    for name in whole:
        assert torch.allclose(ddp[name], whole[name], atol=1e-5, rtol=1e-4), name
    before = ddp_steps.one_step(Context(), slice(0, 2), steps=0)
    assert any(not torch.equal(before[name], whole[name]) for name in whole)  # the steps did move the weights
