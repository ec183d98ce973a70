"""Two training steps of a tiny unet3d, shared by the DDP test's parent process and its ranks.

As a script (one rank of ``torch.distributed.run``): ``ddp_steps.py OUT`` steps on this rank's
sample of the batch and rank 0 saves the weights to OUT."""

from __future__ import annotations

import sys
from pathlib import Path

import torch

from workloads.common import distributed
from workloads.common.distributed import Context
from workloads.unet3d.config import TrainConfig
from workloads.unet3d.model import UNet3DConfig
from workloads.unet3d.settings import RunSettings
from workloads.unet3d.step import build_trainer, random_batch, to_device, train_step


def config() -> TrainConfig:
    return TrainConfig(data_dir=Path("."), results_dir=Path("."), model=UNet3DConfig(filters=(2, 4)),
                       input_shape=(8, 8, 8), val_input_shape=(8, 8, 8), batch_size=1, learning_rate=0.5,
                       lr_warmup_epochs=0, precision="fp32")


def settings(device: torch.device) -> RunSettings:
    return RunSettings(device=device, device_name="test", capability=None, requested_precision="fp32",
                       precision="fp32", threads=1, nproc=2, cpus=2, channels_last=False, compile=False, num_workers=0,
                       workers_why="test", eval_batch=1, why="test")


def one_step(ctx: Context, samples: slice, steps: int = 2) -> dict[str, torch.Tensor]:
    torch.manual_seed(0)
    trainer = build_trainer(config(), settings(ctx.device), ctx)
    image, label, params = random_batch(2, (8, 8, 8), ctx.device, seed=3)
    for _ in range(steps):
        x, y = to_device((image[samples].clone(), label[samples].clone(), params[samples]), trainer.settings)
        train_step(trainer, x, y)
    return {k: v.detach().clone() for k, v in trainer.base.state_dict().items()}


def rank_main(out: Path) -> None:
    torch.set_num_threads(1)
    with distributed.joined("cpu") as ctx:  # leaves once both ranks are done: gloo aborts a peer left talking
        assert ctx.backend == "gloo" and ctx.world_size == 2
        state = one_step(ctx, slice(ctx.rank, ctx.rank + 1))
        if ctx.rank == 0:
            torch.save(state, out)


if __name__ == "__main__":
    rank_main(Path(sys.argv[1]))
