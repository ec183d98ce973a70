"""Dice + cross-entropy loss and the Dice score on tiny inputs with known answers."""

from __future__ import annotations

import math

import torch

from workloads.unet3d.losses import DiceCELoss, dice_per_class, dice_score, one_hot


def _label(values) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.uint8).reshape(1, 1, 1, 1, -1)  # (B, 1, D, H, W)


def _logits_for(label: torch.Tensor, scale: float = 50.0) -> torch.Tensor:
    return one_hot(label, 3) * scale


def test_one_hot_shape_and_values():
    hot = one_hot(_label([0, 1, 2, 2]), 3)
    assert hot.shape == (1, 3, 1, 1, 4)
    assert hot[0, :, 0, 0].T.tolist() == [[1, 0, 0], [0, 1, 0], [0, 0, 1], [0, 0, 1]]


def test_perfect_prediction_scores_one_and_has_near_zero_loss():
    label = _label([0, 1, 1, 2, 0, 2])
    logits = _logits_for(label)
    assert torch.allclose(dice_score(logits, label), torch.ones(2))
    assert float(DiceCELoss()(logits, label)) < 1e-6


def test_dice_score_of_a_half_right_kidney():
    label = _label([1, 1, 1, 1, 0, 0, 0, 0, 2])
    pred = _label([1, 1, 0, 0, 1, 1, 0, 0, 2])  # 2 of 4 kidney voxels, 2 false positives
    kidney, tumour = dice_score(_logits_for(pred), label).tolist()
    assert math.isclose(kidney, (2 * 2 + 1e-6) / (4 + 4 + 1e-6), rel_tol=1e-6)
    assert math.isclose(tumour, 1.0, rel_tol=1e-6)


def test_class_absent_from_both_counts_as_perfect_and_background_is_ignored():
    label = _label([0, 0, 1])
    pred = _label([0, 0, 1])
    assert dice_score(_logits_for(pred), label).tolist()[1] == 1.0  # tumour: 1e-6 / 1e-6
    # all wrong foreground: kidney predicted as tumour
    kidney, tumour = dice_score(_logits_for(_label([0, 0, 2])), label).tolist()
    assert kidney < 1e-5 and tumour < 1e-5


def test_dice_score_averages_over_the_batch():
    label = torch.cat([_label([1, 1]), _label([1, 1])])
    pred = torch.cat([_label([1, 1]), _label([0, 0])])
    kidney, _ = dice_score(_logits_for(pred), label).tolist()
    assert math.isclose(kidney, 0.5, rel_tol=1e-5)


def test_loss_of_uniform_logits_has_the_closed_form_value():
    label = _label([0, 0, 1, 2, 2, 2])  # counts: 2 background, 1 kidney, 3 tumour, 6 voxels
    logits = torch.zeros(1, 3, 1, 1, 6)  # softmax = 1/3 everywhere
    cross_entropy = math.log(3)

    def soft_dice(n_class: int) -> float:
        return (2 * n_class / 3 + 1e-6) / (6 / 3 + n_class + 1e-6)

    expected = ((1 - soft_dice(1) + 1 - soft_dice(3)) / 2 + cross_entropy) / 2
    assert math.isclose(float(DiceCELoss()(logits, label)), expected, rel_tol=1e-5)


def test_loss_decreases_towards_the_right_answer_and_has_gradients():
    label = _label([0, 1, 2, 1])
    logits = torch.zeros(1, 3, 1, 1, 4, requires_grad=True)
    loss = DiceCELoss()(logits, label)
    loss.backward()
    assert logits.grad is not None and float(logits.grad.abs().sum()) > 0
    better = DiceCELoss()(_logits_for(label, 2.0), label)
    assert better.item() < loss.item()


def test_dice_per_class_drops_background():
    hot = one_hot(_label([0, 1, 2]), 3)
    assert dice_per_class(hot, hot).shape == (1, 2)


def test_loss_accepts_bf16_logits():
    label = _label([0, 1, 2, 1])
    logits = _logits_for(label, 3.0).to(torch.bfloat16)
    assert DiceCELoss()(logits, label).dtype == torch.float32


def test_the_fused_loss_equals_the_reference_loss_in_value_and_gradient():
    """One log-softmax pass and no one-hot map: the same function, rounded differently."""
    from workloads.unet3d.losses import FusedDiceCELoss

    torch.manual_seed(0)
    logits = torch.randn(2, 3, 12, 10, 8, requires_grad=True)
    label = torch.randint(0, 3, (2, 1, 12, 10, 8), dtype=torch.uint8)
    label[1] = 0  # a sample without foreground: both Dice terms are the smoothed 1
    reference = DiceCELoss()(logits, label)
    (expected,) = torch.autograd.grad(reference, logits)
    fused = FusedDiceCELoss()(logits, label)
    (got,) = torch.autograd.grad(fused, logits)
    assert abs(fused.item() - reference.item()) < 1e-6
    assert torch.allclose(got, expected, rtol=1e-4, atol=1e-9)
    with torch.autocast("cpu", dtype=torch.bfloat16):  # bf16 logits are computed in fp32, as the reference's
        low = logits.bfloat16()
        assert abs(FusedDiceCELoss()(low, label).item() - DiceCELoss()(low, label).item()) < 1e-6
