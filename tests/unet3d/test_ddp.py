"""DDP on one node over gloo: two processes with one sample each take the same step as one process
with both samples (the gradient all-reduce averages exactly what the batch mean would)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import torch

from workloads.unet3d.config import TrainConfig
from workloads.unet3d.distributed import Context
from workloads.unet3d.model import UNet3DConfig
from workloads.unet3d.settings import RunSettings
from workloads.unet3d.step import build_trainer, random_batch, to_device, train_step

PROJECT = Path(__file__).resolve().parents[2]

RANK_SCRIPT = r"""
import sys
from pathlib import Path

import torch

from workloads.unet3d import distributed
from tests_unet3d_ddp_common import config, settings, one_step

torch.set_num_threads(1)
ctx = distributed.init("cpu")
assert ctx.backend == "gloo" and ctx.world_size == 2
state = one_step(ctx, slice(ctx.rank, ctx.rank + 1))
if ctx.rank == 0:
    torch.save(state, Path(sys.argv[1]))
distributed.shutdown(ctx)
"""

COMMON = r"""
from pathlib import Path

import torch

from workloads.unet3d.config import TrainConfig
from workloads.unet3d.model import UNet3DConfig
from workloads.unet3d.settings import RunSettings
from workloads.unet3d.step import build_trainer, random_batch, to_device, train_step


def config():
    return TrainConfig(data_dir=Path("."), results_dir=Path("."), model=UNet3DConfig(filters=(2, 4)),
                       input_shape=(8, 8, 8), val_input_shape=(8, 8, 8), batch_size=1, learning_rate=0.5,
                       lr_warmup_epochs=0, precision="fp32")


def settings(device):
    return RunSettings(device=device, device_name="test", capability=None, requested_precision="fp32",
                       precision="fp32", threads=1, nproc=2, channels_last=False, compile=False, num_workers=0,
                       eval_batch=1, why="test")


def one_step(ctx, samples, steps=2):
    torch.manual_seed(0)
    trainer = build_trainer(config(), settings(ctx.device), ctx)
    image, label, params = random_batch(2, (8, 8, 8), ctx.device, seed=3)
    for _ in range(steps):
        x, y = to_device((image[samples].clone(), label[samples].clone(), params[samples]), trainer.settings)
        train_step(trainer, x, y)
    return {k: v.detach().clone() for k, v in trainer.base.state_dict().items()}
"""


def test_two_gloo_processes_step_like_one_process_with_the_whole_batch(tmp_path: Path):
    (tmp_path / "tests_unet3d_ddp_common.py").write_text(COMMON)
    script = tmp_path / "rank.py"
    script.write_text(RANK_SCRIPT)
    out = tmp_path / "ddp.pt"
    env = {"PYTHONPATH": f"{PROJECT}:{tmp_path}", "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                           str(script), str(out)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    ddp = torch.load(out)

    sys.path.insert(0, str(tmp_path))
    try:
        import tests_unet3d_ddp_common as common
    finally:
        sys.path.remove(str(tmp_path))
    whole = common.one_step(Context(), slice(0, 2))  # one process, both samples
    assert set(ddp) == set(whole)
    for name in whole:
        assert torch.allclose(ddp[name], whole[name], atol=1e-5, rtol=1e-4), name
    before = common.one_step(Context(), slice(0, 2), steps=0)
    assert any(not torch.equal(before[name], whole[name]) for name in whole)  # the steps did move the weights


def test_a_single_process_is_not_wrapped():
    config = TrainConfig(data_dir=Path("."), results_dir=Path("."), model=UNet3DConfig(filters=(2, 4)),
                         input_shape=(8, 8, 8), val_input_shape=(8, 8, 8))
    settings = RunSettings(device=torch.device("cpu"), device_name="t", capability=None, requested_precision="fp32",
                           precision="fp32", threads=1, nproc=1, channels_last=False, compile=False, num_workers=0,
                           eval_batch=1, why="t")
    trainer = build_trainer(config, settings, Context())
    assert trainer.ddp is trainer.base and trainer.model is trainer.base
    image, label = to_device(random_batch(2, (8, 8, 8), torch.device("cpu")), settings)
    assert torch.isfinite(train_step(trainer, image, label))
