"""The GPU decode path on the CPU: a PIL stand-in for nvJPEG, the same crops, flips and fallbacks."""

from __future__ import annotations

import enum
import sys
import types
from pathlib import Path

import pytest
import torch
from PIL import Image

from workloads.common.errors import SettingsError
from workloads.resnet50 import gpu_decode
from workloads.resnet50.data_loader import EvalTransform, Normalizer, ShardSampler, make_loader, to_tensor
from workloads.resnet50.gpu_decode import (
    DevicePipeline,
    EncodedFolder,
    EvalAugment,
    TrainAugment,
    collate_encoded,
    decode_batch,
    pil_decode,
    torchvision_decoder,
)
from workloads.resnet50.layout import list_dataset
from workloads.resnet50.pipeline import choose_decoder

CPU = torch.device("cpu")


class StandIn:
    """nvJPEG's signature on the CPU: the whole batch or RuntimeError, like decode_jpeg on a bad file."""

    def __init__(self, refuse: set[int] | None = None) -> None:
        self.refuse = refuse or set()
        self.calls: list[int] = []

    def __call__(self, data: list[torch.Tensor], device: torch.device) -> list[torch.Tensor]:
        self.calls.append(len(data))
        out = []
        for item in data:
            if item.numel() in self.refuse:
                raise RuntimeError("nvjpeg: unsupported (stand-in)")
            try:
                out.append(pil_decode(item).to(device))
            except OSError as error:
                raise RuntimeError(str(error)) from None
        return out


def pipeline(samples, augment, decoder, batch_size: int, report=None) -> DevicePipeline:
    sampler = ShardSampler(len(samples), rank=0, world=1, shuffle=False, seed=0, batch_size=batch_size,
                           drop_last=False)
    loader = make_loader(EncodedFolder(samples), sampler, batch_size=batch_size, workers=0, seed=0, pin_memory=False,
                         collate=collate_encoded)
    return DevicePipeline(loader, sampler, decoder, augment, Normalizer(CPU, channels_last=True), CPU, seed=3,
                          name="stand-in", **({"report": report} if report else {}))


def test_train_batches_have_the_crop_shape_labels_and_memory_format(tiny_dataset: Path):
    train, _ = list_dataset(tiny_dataset)
    batches = list(pipeline(train.samples[:10], TrainAugment(crop=16), StandIn(), batch_size=4))
    assert [b.count for b in batches] == [4, 4, 2]
    assert batches[0].images.shape == (4, 3, 16, 16)
    assert batches[0].images.is_contiguous(memory_format=torch.channels_last)
    assert batches[0].labels.tolist() == [label for _, label in train.samples[:4]]


def test_eval_augment_matches_the_pil_eval_transform(tiny_dataset: Path):
    _, val = list_dataset(tiny_dataset)
    path = val.samples[0][0]
    with Image.open(path) as image:
        expected = EvalTransform(resize=30, crop=24)(image.convert("RGB")).float()
    got = EvalAugment(resize=30, crop=24)([to_tensor(Image.open(path).convert("RGB"))], torch.Generator())[0]
    assert got.shape == expected.shape == (3, 24, 24)
    assert float((got - expected).abs().mean()) < 1.5  # antialiased bilinear, as PIL's, up to rounding


def test_train_augment_is_seeded_and_flips(tiny_dataset: Path):
    train, _ = list_dataset(tiny_dataset)
    image = pil_decode(torch.frombuffer(bytearray(train.samples[0][0].read_bytes()), dtype=torch.uint8))
    first = TrainAugment(crop=12)([image] * 8, torch.Generator().manual_seed(1))
    again = TrainAugment(crop=12)([image] * 8, torch.Generator().manual_seed(1))
    assert torch.equal(first, again) and first.shape == (8, 3, 12, 12)
    ramp = torch.arange(64, dtype=torch.uint8).repeat(3, 64, 1) * 4  # (3, 64, 64), brighter to the right
    outs = TrainAugment(crop=12)([ramp] * 40, torch.Generator().manual_seed(0))
    mirrored = int((outs[:, 0, 6, 0] > outs[:, 0, 6, -1]).sum())
    assert 8 <= mirrored <= 32  # about half of the crops are flipped


def test_a_file_nvjpeg_refuses_falls_back_to_pil_and_a_broken_one_is_skipped(own_dataset: Path, capsys):
    train, _ = list_dataset(own_dataset)
    samples = train.samples[:4]
    refused = samples[1][0].stat().st_size
    broken = samples[2][0]
    broken.write_bytes(b"\xff\xd8 not really")
    decoder = StandIn(refuse={refused})
    batches = list(pipeline(samples, EvalAugment(resize=18, crop=16), decoder, batch_size=4))
    assert [(b.count, b.skipped) for b in batches] == [(3, 1)]
    assert batches[0].labels.tolist() == [samples[i][1] for i in (0, 1, 3)]
    assert decoder.calls == [4, 1, 1, 1, 1]  # the batch, then image by image
    assert f"skipping unreadable image {broken}" in capsys.readouterr().err


def test_a_batch_with_no_readable_image_is_empty_not_an_error(own_dataset: Path):
    train, _ = list_dataset(own_dataset)
    samples = train.samples[:2]
    for path, _ in samples:
        path.write_bytes(b"junk")
    batches = list(pipeline(samples, EvalAugment(resize=18, crop=16), StandIn(), batch_size=2))
    assert [(b.count, b.skipped) for b in batches] == [(0, 2)]
    images, kept = decode_batch(StandIn(), collate_encoded([None]), CPU)
    assert (images, kept) == ([], [])


def test_torchvision_is_import_guarded():
    try:
        import torchvision.io  # noqa: F401
    except Exception:  # noqa: BLE001
        assert torchvision_decoder() is None
    else:
        assert torchvision_decoder() is not None


@pytest.mark.parametrize(("requested", "device", "torchvision_ok", "expected"), [
    ("auto", "cuda", True, "torchvision"), ("auto", "cuda", False, "pil"), ("auto", "cpu", True, "pil"),
    ("pil", "cuda", True, "pil"), ("torchvision", "cpu", True, "torchvision"),
])
def test_decoder_choice(requested, device, torchvision_ok, expected):
    assert choose_decoder(requested, device, torchvision_ok=torchvision_ok, dali_ok=False).name == expected


def test_a_forced_decoder_that_cannot_run_is_a_settings_error():
    with pytest.raises(SettingsError, match="torchvision cannot be imported"):
        choose_decoder("torchvision", "cuda", torchvision_ok=False, dali_ok=False)
    with pytest.raises(SettingsError, match="DALI is not installed"):
        choose_decoder("dali", "cuda", torchvision_ok=True, dali_ok=False)


class OldTorchvision:
    """A stand-in torchvision 0.18 (the default image's): ``decode_jpeg`` takes one tensor, never a list
    (lists came in 0.19), and decodes with PIL here in nvJPEG's place."""

    def __init__(self, version: str = "0.18.0a0") -> None:
        self.calls: list[str] = []
        self.version = version

    def decode_jpeg(self, data, mode=None, device="cpu"):
        if isinstance(data, list):
            self.calls.append("list")
            raise RuntimeError("decode_jpeg(): argument 'input' (position 1) must be Tensor, not list")
        self.calls.append("tensor")
        try:
            return pil_decode(data).to(device)
        except OSError as error:
            raise RuntimeError(str(error)) from None

    def install(self, monkeypatch) -> None:
        package = types.ModuleType("torchvision")
        package.__version__ = self.version
        io_module = types.ModuleType("torchvision.io")
        io_module.ImageReadMode = enum.Enum("ImageReadMode", {"RGB": 3})
        io_module.decode_jpeg = self.decode_jpeg
        package.io = io_module
        monkeypatch.setitem(sys.modules, "torchvision", package)
        monkeypatch.setitem(sys.modules, "torchvision.io", io_module)


def counting_pil(monkeypatch) -> list[int]:
    """Count the images the PIL fallback of the GPU path decodes."""
    calls: list[int] = []
    real = gpu_decode.pil_decode

    def pil(data):
        calls.append(1)
        return real(data)

    monkeypatch.setattr(gpu_decode, "pil_decode", pil)
    return calls


def test_torchvision_0_18_decodes_image_by_image_not_with_pil(tiny_dataset: Path, monkeypatch, capsys):
    old = OldTorchvision()
    old.install(monkeypatch)
    pil_calls = counting_pil(monkeypatch)
    decoder = torchvision_decoder()
    train, _ = list_dataset(tiny_dataset)
    batches = list(pipeline(train.samples[:6], TrainAugment(crop=16), decoder, batch_size=3))
    assert [b.count for b in batches] == [3, 3]
    assert pil_calls == [], "every image went to the PIL fallback in the training process"
    assert old.calls == ["tensor"] * 6
    assert "one image per call" in decoder.how and "0.18.0a0" in decoder.how


def test_torchvision_0_19_decodes_the_batch_in_one_call(monkeypatch):
    new = OldTorchvision(version="0.19.1+cu121")
    new.install(monkeypatch)
    decoder = torchvision_decoder()
    assert decoder.batched and "batch" in decoder.how


def test_the_pil_fallback_is_said_and_every_decoder_is_timed(own_dataset: Path, monkeypatch, capsys):
    train, _ = list_dataset(own_dataset)
    samples = train.samples[:4]
    refused = samples[1][0]
    decoder = StandIn(refuse={refused.stat().st_size})
    lines: list[str] = []
    batches = list(pipeline(samples, EvalAugment(resize=18, crop=16), decoder, batch_size=4, report=lines.append))
    assert [b.count for b in batches] == [4]
    said = [line for line in lines if str(refused) in line]
    assert len(said) == 1 and "PIL" in said[0] and "nvjpeg: unsupported (stand-in)" in said[0]
    (summary,) = [line for line in lines if "images/s" in line]
    assert "3 images by stand-in" in summary and "1 by PIL" in summary
    rates = [float(word) for word in summary.replace(",", " ").split() if word.replace(".", "", 1).isdigit()]
    assert rates and all(rate >= 0 for rate in rates)
