from __future__ import annotations

import pytest
import torch
from torch import nn

from workloads.resnet50.optim import LARS, Schedule, build_optimizer, parameter_groups


def test_schedule_warms_up_linearly_then_decays_with_power_two():
    schedule = Schedule(base_lr=10.0, end_lr=0.0001, warmup_steps=4, decay_steps=10, power=2.0)
    assert [schedule.lr(s) for s in range(4)] == pytest.approx([2.5, 5.0, 7.5, 10.0])
    assert schedule.lr(4) == pytest.approx(10.0)
    assert schedule.lr(9) == pytest.approx((10.0 - 0.0001) * 0.25 + 0.0001)  # halfway: (1 - 0.5) ** 2
    assert schedule.lr(14) == pytest.approx(0.0001)
    assert schedule.lr(1000) == pytest.approx(0.0001)


def test_schedule_rejects_end_above_base():
    with pytest.raises(ValueError):
        Schedule(base_lr=0.1, end_lr=1.0, warmup_steps=0, decay_steps=1)


def _tiny() -> nn.Module:
    return nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))


def test_batchnorm_and_biases_get_no_weight_decay():
    groups = parameter_groups(_tiny(), weight_decay=0.5)
    assert [p.shape for p in groups[0]["params"]] == [torch.Size([4, 3])]
    assert groups[0]["weight_decay"] == 0.5 and groups[0]["adapt"]
    assert len(groups[1]["params"]) == 3 and groups[1]["weight_decay"] == 0.0 and not groups[1]["adapt"]


def test_lars_update_matches_the_formula():
    weight = nn.Parameter(torch.tensor([3.0, 4.0]))  # |w| = 5
    weight.grad = torch.tensor([0.6, 0.8])  # |g| = 1
    bias = nn.Parameter(torch.tensor([1.0]))
    bias.grad = torch.tensor([0.5])
    lr, momentum, decay, eta = 2.0, 0.9, 0.01, 0.001
    optimizer = LARS([{"params": [weight], "adapt": True, "weight_decay": decay},
                      {"params": [bias], "adapt": False, "weight_decay": 0.0}],
                     lr=lr, momentum=momentum, weight_decay=decay, eta=eta)
    optimizer.step()
    trust = eta * 5.0 / (1.0 + decay * 5.0)
    expected = torch.tensor([3.0, 4.0]) - lr * trust * (torch.tensor([0.6, 0.8]) + decay * torch.tensor([3.0, 4.0]))
    torch.testing.assert_close(weight.detach(), expected)
    torch.testing.assert_close(bias.detach(), torch.tensor([1.0 - lr * 0.5]))
    # second step: momentum carries the first velocity
    first_velocity = torch.tensor([3.0, 4.0]) - expected
    weight.grad = torch.tensor([0.0, 0.0])
    bias.grad = torch.tensor([0.0])
    before = weight.detach().clone()
    optimizer.step()  # zero gradient: trust falls back to 1, update = wd * w
    velocity = momentum * first_velocity + lr * decay * before
    torch.testing.assert_close(weight.detach(), before - velocity)


def test_build_optimizer_names():
    model = _tiny()
    assert isinstance(build_optimizer("lars", model, lr=1, momentum=0.9, weight_decay=1e-4, lars_eta=1e-3,
                                      lars_epsilon=0.0), LARS)
    sgd = build_optimizer("sgd", model, lr=1, momentum=0.9, weight_decay=1e-4, lars_eta=1e-3, lars_epsilon=0.0)
    assert isinstance(sgd, torch.optim.SGD)
    assert [g["weight_decay"] for g in sgd.param_groups] == [1e-4, 0.0]
    with pytest.raises(ValueError):
        build_optimizer("adam", model, lr=1, momentum=0.9, weight_decay=0, lars_eta=1e-3, lars_epsilon=0.0)
