"""Sliding-window inference and the case Dice: trim, pad with -2.2, Gaussian blending, crop back."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from workloads.unet3d.evaluate import evaluate_case, mean_dice, sliding_window_logits
from workloads.unet3d.windows import PAD_VALUE, importance_map, padding, trim_slices


def test_importance_map_is_a_normalised_cube_rooted_gaussian():
    weights = importance_map((128, 128, 128))
    assert weights.shape == (128, 128, 128) and weights.dtype == np.float32
    assert math.isclose(float(weights.max()), 1.0, rel_tol=1e-6)
    assert np.allclose(weights, weights[::-1, :, :]) and np.allclose(weights, weights.transpose(2, 1, 0))
    # cbrt(g(i) g(j) g(k)) at the corner is g(0) itself when all three match (std 0.125 * 128 = 16)
    g = lambda n: math.exp(-0.5 * ((n - 63.5) / 16) ** 2)  # noqa: E731 - scipy's window, by hand
    assert math.isclose(float(weights[0, 0, 0]), g(0) / g(63), rel_tol=1e-5)
    # along one axis it is the cube root of the 1-D window
    assert math.isclose(float(weights[0, 63, 63]), (g(0) / g(63)) ** (1 / 3), rel_tol=1e-5)


@pytest.mark.parametrize(
    "size, expected",
    [(128, slice(0, 128)), (150, slice(11, 139)), (151, slice(11, 139)), (180, slice(0, 180)), (160, slice(0, 160))],
)
def test_trim_crops_a_remainder_below_half_a_stride(size, expected):
    # stride 64: 150 % 64 = 22 < 32 -> crop 11 + 11; 151 -> 23 = 11 + 12; 180 % 64 = 52 -> keep; 160 % 64 = 32 -> keep
    assert trim_slices((size,), (64,)) == (expected,)


@pytest.mark.parametrize(
    "size, expected",
    [(128, (0, 0)), (192, (0, 0)), (100, (14, 14)), (64, (32, 32)), (129, (31, 32)), (20, (54, 54))],
)
def test_padding_reaches_whole_strides_and_at_least_one_window(size, expected):
    assert padding((size,), (128,), (64,)) == [expected]


class PointwiseModel:
    """Logits that depend on each voxel only, so blending any windows must give them back exactly."""

    def __init__(self) -> None:
        self.calls = 0
        self.min_seen = float("inf")

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        self.min_seen = min(self.min_seen, float(x.min()))
        return torch.cat([x, 2 * x, -x], dim=1)


def test_sliding_window_returns_pointwise_logits_in_place():
    torch.manual_seed(0)
    image = torch.rand(1, 1, 20, 27, 33)  # odd sizes: padding on every axis, uneven split
    model = PointwiseModel()
    out = sliding_window_logits(model, image, (16, 16, 16), overlap=0.5)
    assert out.shape == (1, 3, 20, 27, 33)
    assert torch.allclose(out, torch.cat([image, 2 * image, -image], dim=1), atol=1e-5)
    assert model.min_seen == pytest.approx(PAD_VALUE)  # the padding reached the model


def test_sliding_window_visits_every_window_once():
    model = PointwiseModel()
    sliding_window_logits(model, torch.zeros(1, 1, 32, 32, 48), (16, 16, 16), overlap=0.5)
    # stride 8: starts 0, 8, 16 on the 32 axes (3 each) and 0..32 on the 48 axis (5)
    assert model.calls == 3 * 3 * 5


def test_no_padding_seen_when_the_volume_is_a_whole_number_of_strides():
    model = PointwiseModel()
    sliding_window_logits(model, torch.zeros(1, 1, 32, 32, 32), (16, 16, 16), overlap=0.5)
    assert model.min_seen == 0.0


class OracleModel:
    """Predicts the class written in the image (the image holds the label values)."""

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        classes = torch.clamp(torch.round(x), 0, 2).long()[:, 0]
        return torch.nn.functional.one_hot(classes, 3).permute(0, 4, 1, 2, 3).float() * 10


def test_evaluate_case_scores_a_perfect_model_as_one():
    label = np.zeros((1, 24, 24, 24), dtype=np.uint8)
    label[0, 4:10, 4:10, 4:10] = 1
    label[0, 12:16, 12:20, 5:9] = 2
    dice = evaluate_case(OracleModel(), label.astype(np.float32), label, (16, 16, 16), 0.5)
    assert torch.allclose(dice, torch.ones(2))


def test_evaluate_case_scores_the_trimmed_label():
    # 33 % 8 = 1 < 4: one voxel is trimmed at the end of each axis; a tumour only there is not scored
    label = np.zeros((1, 33, 33, 33), dtype=np.uint8)
    label[0, 5:9, 5:9, 5:9] = 1
    image = label.astype(np.float32)
    label_with_hidden_tumour = label.copy()
    label_with_hidden_tumour[0, 32, 32, 32] = 2
    dice = evaluate_case(OracleModel(), image, label_with_hidden_tumour, (16, 16, 16), 0.5)
    assert torch.allclose(dice, torch.ones(2))


def test_mean_dice_is_the_mean_of_kidney_and_tumour_over_cases():
    kidney, tumour, accuracy = mean_dice([torch.tensor([1.0, 0.5]), torch.tensor([0.5, 0.0])])
    assert (kidney, tumour, accuracy) == (0.75, 0.25, 0.5)


@pytest.mark.parametrize("batch", [2, 3, 7, 64])
@pytest.mark.parametrize("fixed", [False, True])
def test_batched_windows_blend_to_the_same_logits_as_one_at_a_time(batch, fixed):
    from workloads.unet3d.model import UNet3D, UNet3DConfig

    torch.manual_seed(0)
    model = UNet3D(UNet3DConfig(filters=(2, 4))).eval()
    image = torch.randn(1, 1, 21, 26, 30)  # 3 x 4 x 4 windows of 8^3 after padding, uneven edges
    calls: list[int] = []

    def counting(x: torch.Tensor) -> torch.Tensor:
        calls.append(x.shape[0])
        return model(x)

    with torch.no_grad():
        one = sliding_window_logits(model, image, (8, 8, 8), 0.5, batch=1)
        many = sliding_window_logits(counting, image, (8, 8, 8), 0.5, batch=batch, fixed_batch=fixed)
    assert torch.allclose(one, many, atol=1e-5, rtol=1e-5)
    windows = 5 * 6 * 7  # stride 4: padded 24, 28, 32 -> 5, 6, 7 starts
    assert sum(calls) == (len(calls) * batch if fixed else windows)
    assert len(calls) == -(-windows // batch)


def test_batched_evaluation_gives_the_same_dice():
    from workloads.unet3d.model import UNet3D, UNet3DConfig

    torch.manual_seed(1)
    model = UNet3D(UNet3DConfig(filters=(2, 4))).eval()
    label = np.zeros((1, 26, 24, 22), dtype=np.uint8)
    label[0, 3:12, 4:15, 2:9] = 1
    label[0, 14:20, 10:16, 12:20] = 2
    image = np.random.default_rng(0).standard_normal(label.shape).astype(np.float32) + label
    with torch.no_grad():
        dice = [evaluate_case(model, image, label, (8, 8, 8), 0.5, batch=b) for b in (1, 4, 100)]
    assert torch.allclose(dice[0], dice[1]) and torch.allclose(dice[0], dice[2])
