"""The training step: no host reads per step, collective skip and divergence decisions under DDP."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from workloads.common import distributed
from workloads.resnet50.data_loader import DeviceBatch
from workloads.resnet50.engine import Precision, train_epoch
from workloads.resnet50.optim import Schedule, build_optimizer

ROOT = Path(__file__).resolve().parents[2]
WORKER = Path(__file__).with_name("ddp_worker.py")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_two_ranks(tmp_path: Path, mode: str) -> list[dict]:
    port = free_port()
    procs = []
    for rank in range(2):
        env = {**os.environ, "RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_RANK": str(rank),
               "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "OMP_NUM_THREADS": "1",
               "PYTHONPATH": str(ROOT)}
        procs.append(subprocess.Popen([sys.executable, str(WORKER), str(tmp_path), mode], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    try:
        outputs = [proc.communicate(timeout=90) for proc in procs]
    finally:
        for proc in procs:
            proc.kill()
    for proc, (_, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err[-2000:]
    return [json.loads((tmp_path / f"rank{rank}.json").read_text()) for rank in range(2)]


def test_an_empty_batch_on_one_rank_is_a_zero_weight_step_and_the_ranks_stay_in_step(tmp_path: Path):
    ranks = run_two_ranks(tmp_path, "clean")
    assert [(r["steps"], r["skipped"], r["diverged"]) for r in ranks] == [(6, 0, False), (6, 4, False)]
    assert ranks[0]["weights"] == ranks[1]["weights"]  # the same steps everywhere: the same model


def test_no_collective_per_step_only_the_finite_check(tmp_path: Path):
    """6 steps and a finite check every 50: the check at the end of the epoch is the only host-side
    collective; no per-step agreement on skipping, no broadcast of BatchNorm buffers per forward."""
    ranks = run_two_ranks(tmp_path, "clean")
    assert [r["collectives"] for r in ranks] == [{"all_reduce": 1}, {"all_reduce": 1}]


def test_a_non_finite_loss_on_one_rank_stops_every_rank_at_the_same_step(tmp_path: Path):
    ranks = run_two_ranks(tmp_path, "poison")
    assert [r["diverged"] for r in ranks] == [True, True]
    assert ranks[0]["steps"] == ranks[1]["steps"] == 4  # steps 0 to 3: the check after step 3 sees it


class NoHostReads(torch.overrides.TorchFunctionMode):
    """Fails on the calls that read a tensor back to the host (on a GPU: a wait for the device),
    except while ``allowed`` is set."""

    FORBIDDEN = {"item", "tolist", "__bool__", "__float__", "__int__", "cpu", "numpy"}

    def __init__(self) -> None:
        super().__init__()
        self.allowed = False

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if not self.allowed and getattr(func, "__name__", "") in self.FORBIDDEN:
            raise AssertionError(f"host read in the step: {func.__name__}")
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("optimizer_name", ["lars", "sgd"])
def test_steps_read_nothing_back_but_the_finite_checks(monkeypatch, optimizer_name):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 3))
    optimizer = build_optimizer(optimizer_name, model, lr=0.1, momentum=0.9, weight_decay=5e-5, lars_eta=0.001,
                                lars_epsilon=0.0)
    batches = [DeviceBatch(torch.randn(4, 3, 8, 8), torch.randint(0, 3, (4,)), 4, 0) for _ in range(7)]
    precision = Precision(dtype="fp32", channels_last=False)
    guard = NoHostReads()
    checks: list[int] = []
    real_check = distributed.any_rank

    def allowed_check(flags, ctx):
        checks.append(1)
        guard.allowed = True
        try:
            return real_check(flags, ctx)
        finally:
            guard.allowed = False

    monkeypatch.setattr(distributed, "any_rank", allowed_check)
    schedule = Schedule(base_lr=0.1, end_lr=0.0001, warmup_steps=2, decay_steps=10)
    ctx = distributed.Context()
    with guard:
        stats = train_epoch(model, batches, optimizer, nn.CrossEntropyLoss(label_smoothing=0.1), schedule, 0,
                            precision, precision.scaler(ctx.device), ctx, finite_check_steps=3)
    assert (stats.steps, stats.diverged, len(checks)) == (7, False, 3)  # after steps 3 and 6, and at the end
    assert stats.mean_loss == pytest.approx(stats.mean_loss) and stats.mean_loss > 0


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_mixed_precision_step_runs_and_fp16_gets_a_scaler(dtype):
    precision = Precision(dtype=dtype, channels_last=True)
    assert precision.scaler(torch.device("cpu")).is_enabled() == (dtype == "fp16")
