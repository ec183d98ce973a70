"""Evaluation, the training step and the collectives with the model on another device than the data.

The data comes from the CPU (NumPy, the loader); the model lives on ``meta`` here, a stand-in for
a GPU: any tensor left on the CPU next to it fails loudly, as it would on CUDA.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import numpy as np
import torch

from workloads.common import distributed
from workloads.common.distributed import Context
from workloads.unet3d.config import TrainConfig
from workloads.unet3d.evaluate import evaluate_case
from workloads.unet3d.model import UNet3D, UNet3DConfig
from workloads.unet3d.settings import RunSettings
from workloads.unet3d.step import build_trainer, random_batch, to_device, train_step

META = torch.device("meta")


class DeviceCheckingModel(torch.nn.Module):
    """A tiny U-Net that asserts every input lives where its weights do."""

    def __init__(self, device: torch.device) -> None:
        super().__init__()
        self.net = UNet3D(UNet3DConfig(filters=(2, 4))).to(device)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weight = next(self.parameters())
        assert x.device == weight.device, f"input on {x.device}, model on {weight.device}"
        return self.net(x)


def _settings(device: torch.device, **kw) -> RunSettings:
    values = dict(device=device, device_name="test", capability=None, requested_precision="fp32", precision="fp32",
                  threads=1, nproc=1, cpus=1, channels_last=False, compile=False, num_workers=0, workers_why="test",
                  eval_batch=2, why="test")
    values.update(kw)
    return RunSettings(**values)


def test_evaluation_of_numpy_data_runs_where_the_model_is():
    label = np.zeros((1, 20, 18, 17), dtype=np.uint8)
    label[0, 4:9, 4:9, 4:9] = 1
    image = label.astype(np.float32)
    model = DeviceCheckingModel(META)
    dice = evaluate_case(model, image, label, (8, 8, 8), 0.5)  # the device is the model's
    assert dice.device == META and dice.shape == (2,)
    dice = evaluate_case(model, torch.from_numpy(image), torch.from_numpy(label), (8, 8, 8), 0.5, device=META,
                         batch=3, fixed_batch=True)
    assert dice.device == META and dice.shape == (2,)


def test_a_training_step_on_loader_batches_runs_where_the_model_is():
    config = TrainConfig(data_dir=Path("."), results_dir=Path("."), model=UNet3DConfig(filters=(2, 4)),
                         input_shape=(8, 8, 8), val_input_shape=(8, 8, 8), precision="fp32")
    trainer = build_trainer(config, _settings(META), Context(device=META))
    image, label, params = random_batch(2, (8, 8, 8), torch.device("cpu"))
    params[0, :3] = 1.0  # flip every axis of the first sample
    params[1, 4:] = torch.tensor([0.05, 7.0], dtype=torch.float64)  # noise on the second
    image, label = to_device((image, label, params), trainer.settings)
    assert image.device == META and label.device == META
    loss = train_step(trainer, image, label)
    assert loss.device == META
    assert all(p.device == META for p in trainer.base.parameters())
    assert trainer.optimizer.state  # the step ran: momentum buffers exist


def test_collectives_hand_over_tensors_on_the_process_device(monkeypatch):
    seen: list[torch.device] = []

    def record(tensor, *args, **kwargs):
        seen.append(tensor.device)

    monkeypatch.setattr(distributed.dist, "all_reduce", record)
    monkeypatch.setattr(distributed.dist, "broadcast", record)
    ctx = Context(rank=0, world_size=2, device=META, backend="nccl")
    total = distributed.all_reduce_sum(torch.zeros(3, dtype=torch.float64), ctx)
    assert total.device == META
    with contextlib.suppress(NotImplementedError, RuntimeError):  # reading a meta tensor back fails;
        distributed.broadcast_int(5, ctx)  # where it was sent is what matters
    assert seen == [META, META]


def test_init_selects_the_gpu_before_the_process_group(monkeypatch):
    calls: list[str] = []
    monkeypatch.setattr(torch.cuda, "set_device", lambda index: calls.append(f"set_device({index})"))
    monkeypatch.setattr(distributed.dist, "is_initialized", lambda: False)
    monkeypatch.setattr(distributed.dist, "init_process_group",
                        lambda backend, rank, world_size: calls.append(f"init_process_group({backend})"))
    ctx = distributed.init("cuda", {"WORLD_SIZE": "2", "RANK": "1", "LOCAL_RANK": "1"})
    assert calls == ["set_device(1)", "init_process_group(nccl)"]
    assert ctx.device == torch.device("cuda", 1) and ctx.backend == "nccl" and ctx.rank == 1


def test_warm_up_steps_leave_weights_optimizer_and_scaler_as_they_were():
    from workloads.unet3d.step import restored

    config = TrainConfig(data_dir=Path("."), results_dir=Path("."), model=UNet3DConfig(filters=(2, 4)),
                         input_shape=(8, 8, 8), val_input_shape=(8, 8, 8), precision="fp32", learning_rate=0.5,
                         lr_warmup_epochs=0)
    cpu = torch.device("cpu")
    trainer = build_trainer(config, _settings(cpu), Context())
    batch = random_batch(2, (8, 8, 8), cpu)
    train_step(trainer, *to_device(batch, trainer.settings))  # momentum buffers exist
    before = {k: v.clone() for k, v in trainer.base.state_dict().items()}
    momentum = {k: v["momentum_buffer"].clone() for k, v in trainer.optimizer.state_dict()["state"].items()}
    with restored(trainer):
        for _ in range(3):
            train_step(trainer, *to_device(random_batch(2, (8, 8, 8), cpu, seed=5), trainer.settings))
        assert any(not torch.equal(before[k], v) for k, v in trainer.base.state_dict().items())
    assert all(torch.equal(before[k], v) for k, v in trainer.base.state_dict().items())
    state = trainer.optimizer.state_dict()["state"]
    assert all(torch.equal(momentum[k], state[k]["momentum_buffer"]) for k in momentum)
    assert all(p.grad is None for p in trainer.base.parameters())
