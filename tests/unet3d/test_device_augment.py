"""Flips, brightness and noise on the model's device equal the CPU path: exactly where deterministic,
in distribution where random."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from workloads.unet3d import device_augment
from workloads.unet3d.augment import (
    FLIP_COLUMNS,
    NOISE_MAX_STD,
    NOISE_SEED_COLUMN,
    NOISE_STD_COLUMN,
    SCALE_COLUMN,
    BalancedCrop,
    augment,
    crop_patch,
    draw_params,
)


def _case() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    image = rng.standard_normal((1, 30, 28, 26)).astype(np.float32)
    label = np.zeros((1, 30, 28, 26), dtype=np.uint8)
    label[0, 5:15, 6:16, 4:12] = 1
    label[0, 8:11, 9:12, 6:9] = 2
    return image, label


def _split_path(image, label, crop, seed):
    """What the training loader and the device do for one sample: crop + params, then apply."""
    rng = np.random.default_rng(seed)
    x, y = crop_patch(image, label, crop, rng)
    params = torch.from_numpy(draw_params(rng))[None]
    out_x, out_y = device_augment.apply(torch.from_numpy(x)[None], torch.from_numpy(y)[None], params)
    return out_x[0].numpy(), out_y[0].numpy(), params[0]


def test_same_crop_flips_and_brightness_as_the_cpu_path_for_every_seed_without_noise():
    image, label = _case()
    crop = BalancedCrop(patch=(16, 16, 16), oversampling=0.4)
    checked = flipped = brightened = 0
    for seed in range(400):
        x, y, params = _split_path(image, label, crop, seed)
        if params[NOISE_STD_COLUMN] > 0:
            continue  # noise values differ by design; see the statistical test
        ref_x, ref_y = augment(image, label, crop, np.random.default_rng(seed))
        assert np.array_equal(y, ref_y), seed  # crop and flips: exact
        assert np.array_equal(x, ref_x), seed  # brightness: the same float32 product
        checked += 1
        flipped += bool(params[list(FLIP_COLUMNS)].any())
        brightened += params[SCALE_COLUMN] != 1.0
    assert checked > 300 and flipped > 100 and brightened > 10


def test_decisions_are_drawn_with_the_reference_probabilities():
    params = np.stack([draw_params(np.random.default_rng(seed)) for seed in range(20000)])
    flips = params[:, list(FLIP_COLUMNS)]
    assert np.allclose(flips.mean(axis=0), 1 / 3, atol=0.015)
    scaled = params[:, SCALE_COLUMN] != 1.0
    assert abs(scaled.mean() - 0.1) < 0.01
    assert params[scaled, SCALE_COLUMN].min() >= 1.7 and params[scaled, SCALE_COLUMN].max() <= 2.3  # 1 + U(0.7, 1.3)
    noisy = params[:, NOISE_STD_COLUMN] > 0
    assert abs(noisy.mean() - 0.1) < 0.01
    assert params[noisy, NOISE_STD_COLUMN].max() <= NOISE_MAX_STD
    assert abs(params[noisy, NOISE_STD_COLUMN].mean() - NOISE_MAX_STD / 2) < 0.005
    assert len(set(params[noisy, NOISE_SEED_COLUMN])) == noisy.sum()


def test_noise_has_the_drawn_standard_deviation_and_is_reproducible():
    sample = torch.zeros(4, 1, 32, 32, 32)
    params = torch.zeros(4, 6, dtype=torch.float64)
    params[:, SCALE_COLUMN] = 1.0
    params[:, NOISE_STD_COLUMN] = torch.tensor([0.0, 0.02, 0.05, 0.1], dtype=torch.float64)
    params[:, NOISE_SEED_COLUMN] = torch.tensor([0, 11, 12, 13], dtype=torch.float64)
    noisy, _ = device_augment.apply(sample.clone(), torch.zeros(4, 1, 32, 32, 32, dtype=torch.uint8), params)
    assert torch.equal(noisy[0], sample[0])
    for b, std in [(1, 0.02), (2, 0.05), (3, 0.1)]:
        assert abs(float(noisy[b].std()) - std) < 0.02 * std
        assert abs(float(noisy[b].mean())) < 0.02 * std
    again, _ = device_augment.apply(sample.clone(), torch.zeros(4, 1, 32, 32, 32, dtype=torch.uint8), params)
    assert torch.equal(noisy, again)


def test_cpu_and_device_noise_agree_in_distribution():
    """The CPU path's noise (numpy) and the device path's (torch) for the same noisy seeds."""
    image, label = np.zeros((1, 24, 24, 24), np.float32), np.zeros((1, 24, 24, 24), np.uint8)
    crop = BalancedCrop(patch=(24, 24, 24), oversampling=0.0)
    cpu_std, device_std = [], []
    for seed in range(3000):
        x, _, params = _split_path(image, label, crop, seed)
        if params[NOISE_STD_COLUMN] == 0:
            continue
        ref_x, _ = augment(image, label, crop, np.random.default_rng(seed))
        device_std.append(float(x.std()) / float(params[NOISE_STD_COLUMN]))
        cpu_std.append(float(ref_x.std()) / float(params[NOISE_STD_COLUMN]))
    assert len(cpu_std) > 200
    assert np.mean(device_std) == pytest.approx(1.0, abs=0.01) and np.mean(cpu_std) == pytest.approx(1.0, abs=0.01)


def test_parameters_must_stay_on_the_host():
    with pytest.raises(ValueError, match="CPU"):
        device_augment.apply(torch.zeros(1, 1, 2, 2, 2), torch.zeros(1, 1, 2, 2, 2), torch.zeros(1, 6, device="meta"))
