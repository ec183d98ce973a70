from __future__ import annotations

from pathlib import Path

import pytest
import torch
from PIL import Image

from workloads.resnet50.data_loader import (
    Batch,
    EvalTransform,
    HostPipeline,
    ImageFolder,
    Normalizer,
    ShardSampler,
    TrainTransform,
    collate_skipping,
    make_loader,
    random_resized_box,
)
from workloads.resnet50.layout import list_dataset


def test_random_resized_box_stays_inside_and_within_scale():
    torch.manual_seed(0)
    for _ in range(200):
        left, top, right, bottom = random_resized_box(500, 375)
        assert 0 <= left < right <= 500 and 0 <= top < bottom <= 375
        area = (right - left) * (bottom - top)
        assert 0.06 * 500 * 375 <= area <= 500 * 375


def test_random_resized_box_falls_back_to_a_centre_crop_for_extreme_shapes():
    torch.manual_seed(0)
    left, top, right, bottom = random_resized_box(1000, 10, scale=(0.99, 1.0))
    assert (right - left, bottom - top) == (13, 10)  # widest allowed ratio 4:3 at full height
    assert left == (1000 - 13) // 2


def test_train_and_eval_transforms_give_uint8_crops():
    image = Image.new("RGB", (50, 30), (10, 200, 30))
    assert TrainTransform(crop=24)(image).shape == (3, 24, 24)
    out = EvalTransform(resize=36, crop=32)(image)
    assert out.shape == (3, 32, 32) and out.dtype == torch.uint8
    assert out[:, 0, 0].tolist() == [10, 200, 30]


def test_eval_transform_rejects_crop_larger_than_resize():
    with pytest.raises(ValueError):
        EvalTransform(resize=32, crop=36)


def test_corrupt_image_is_reported_and_skipped(own_dataset: Path, capsys):
    train, _ = list_dataset(own_dataset)
    broken = train.samples[3][0]
    broken.write_bytes(broken.read_bytes()[:40])  # truncated JPEG
    dataset = ImageFolder(train.samples[:8], EvalTransform(resize=18, crop=16))
    batch = collate_skipping([dataset[i] for i in range(8)])
    assert batch.images.shape == (7, 3, 16, 16) and batch.skipped == 1
    assert f"skipping unreadable image {broken}" in capsys.readouterr().err


def test_shard_sampler_eval_covers_every_sample_once():
    shards = [list(ShardSampler(10, rank=r, world=3, shuffle=False, seed=0, batch_size=4, drop_last=False))
              for r in range(3)]
    assert sorted(i for shard in shards for i in shard) == list(range(10))


def test_shard_sampler_train_gives_equal_full_batches_and_reshuffles():
    samplers = [ShardSampler(103, rank=r, world=2, shuffle=True, seed=5, batch_size=8, drop_last=True)
                for r in range(2)]
    shards = [list(s) for s in samplers]
    assert [len(s) for s in shards] == [48, 48] and not set(shards[0]) & set(shards[1])
    for sampler in samplers:
        sampler.set_epoch(1)
    assert [list(s) for s in samplers] != shards


def test_normalize_returns_channels_last_floats():
    images = torch.full((2, 3, 4, 4), 255, dtype=torch.uint8)
    out = Normalizer(torch.device("cpu"), channels_last=True)(images)
    assert out.dtype == torch.float32 and out.is_contiguous(memory_format=torch.channels_last)
    assert float(out[0, 0, 0, 0]) == pytest.approx((255 - 0.485 * 255) / (0.229 * 255))
    assert float(out[0, 2, 0, 0]) == pytest.approx((255 - 0.406 * 255) / (0.225 * 255))
    plain = Normalizer(torch.device("cpu"), channels_last=False)(images)
    assert plain.is_contiguous() and torch.equal(plain, out)


def test_normalize_builds_no_tensor_from_host_data_per_call(monkeypatch):
    normalizer = Normalizer(torch.device("cpu"), channels_last=True)
    expected = normalizer(torch.arange(96, dtype=torch.uint8).view(2, 3, 4, 4))

    def forbidden(*args, **kwargs):
        raise AssertionError("a tensor built from host data in a step (a blocking copy on a GPU)")

    for factory in ("tensor", "as_tensor", "from_numpy", "full", "ones", "zeros"):
        monkeypatch.setattr(torch, factory, forbidden)
    assert torch.equal(normalizer(torch.arange(96, dtype=torch.uint8).view(2, 3, 4, 4)), expected)


def test_batches_are_pinned_by_the_loaders_pin_memory_step(monkeypatch):
    """DataLoader(pin_memory=True) calls ``pin_memory()`` on a custom batch; without that method the
    batch silently stays pageable. Pinning needs a GPU, so the tensor method is stood in for."""
    from torch.utils.data._utils.pin_memory import pin_memory as loader_pin_memory

    pinned: list[tuple[int, ...]] = []

    def fake_pin(self, *args, **kwargs):
        pinned.append(tuple(self.shape))
        return self.clone()

    monkeypatch.setattr(torch.Tensor, "pin_memory", fake_pin)
    batch = collate_skipping([(torch.zeros(3, 4, 4, dtype=torch.uint8), 1), None, (torch.ones(3, 4, 4,
                                                                                        dtype=torch.uint8), 2)])
    out = loader_pin_memory(batch)
    assert isinstance(out, Batch) and out.skipped == 1 and out.labels.tolist() == [1, 2]
    assert sorted(pinned) == [(2,), (2, 3, 4, 4)]


def test_host_pipeline_yields_normalized_batches_and_empty_ones(own_dataset: Path):
    train, _ = list_dataset(own_dataset)
    samples = train.samples[:6]
    for path, _ in samples[:3]:
        path.write_bytes(b"broken")
    sampler = ShardSampler(6, rank=0, world=1, shuffle=False, seed=0, batch_size=3, drop_last=True)
    loader = make_loader(ImageFolder(samples, EvalTransform(resize=18, crop=16)), sampler, batch_size=3, workers=0,
                         seed=0, pin_memory=False)
    batches = list(HostPipeline(loader, sampler, Normalizer(torch.device("cpu"), channels_last=True),
                                torch.device("cpu")))
    assert [(b.count, b.skipped) for b in batches] == [(0, 3), (3, 0)]
    assert batches[1].images.shape == (3, 3, 16, 16) and batches[1].images.dtype == torch.float32
