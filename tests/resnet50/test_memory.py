"""The closed preset's batch against the GPU's memory, said at start-up (issue 18 item 10).

The device is a stand-in: ``device_facts`` reports a CUDA card of a given total memory while the
run itself stays on the CPU, so the check is exercised through the training entry point.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from workloads.common.devices import DeviceFacts
from workloads.common.errors import SettingsError
from workloads.resnet50 import runtime
from workloads.resnet50.config import build
from workloads.resnet50.memory import estimate, fits_or_raise, largest_batch
from workloads.resnet50.train import main

GIB = 2**30
V100_16GB = 16_945_512_448  # torch.cuda.get_device_properties(...).total_memory of a V100-SXM2-16GB
T4 = 15_655_829_504
A100_80GB = 85_045_608_448


def gpu(name: str, total: int, capability: tuple[int, int]):
    def facts(device):
        return DeviceFacts(kind="cuda", name=name, capability=capability, cpu_bf16_native=False, total_memory=total)

    return facts


def test_the_closed_batch_does_not_fit_16_gb_and_the_run_says_so_before_it_starts(tiny_dataset: Path, monkeypatch,
                                                                                 capsys):
    monkeypatch.setattr(runtime, "device_facts", gpu("Tesla V100-SXM2-16GB", V100_16GB, (7, 0)))
    code = main(["--data", str(tiny_dataset), "--seed", "1", "--preset", "closed", "--set", "device=cpu",
                 "workers=0"])
    captured = capsys.readouterr()
    assert code == 2
    (line,) = captured.err.splitlines()
    assert "batch_size=408" in line and "Tesla V100-SXM2-16GB" in line and "fp16" in line
    assert 'RESNET50_SET="batch_size=' in line
    assert "run_start" not in captured.out and "init_stop" not in captured.out


@pytest.mark.parametrize(("total", "capability", "precision"), [(V100_16GB, (7, 0), "fp16"), (T4, (7, 5), "fp16")])
def test_408_needs_more_than_a_16_gb_card_and_the_suggestion_fits(total, capability, precision):
    config = build("closed", 8, [])
    assert estimate(config, precision, config.batch_size) > total
    with pytest.raises(SettingsError) as raised:
        fits_or_raise(config, precision, total_memory=total, device_name="card", processes=8)
    suggested = largest_batch(config, precision, total)
    assert 200 <= suggested < 408 and estimate(config, precision, suggested) <= total
    assert 'RESNET50_SET="batch_size=204"' in str(raised.value)  # 8 x 204 = 1632: a global batch with an RCP
    assert "\n" not in str(raised.value)


def test_a_batch_that_fits_and_the_cpu_pass(monkeypatch):
    config = build("closed", 8, [])
    fits_or_raise(config, "bf16", total_memory=A100_80GB, device_name="A100-SXM4-80GB", processes=8)
    fits_or_raise(config, "fp32", total_memory=None, device_name="cpu", processes=1)
    small = build("closed", 1, ["batch_size=192"])
    fits_or_raise(small, "fp16", total_memory=V100_16GB, device_name="V100", processes=1)


def test_the_check_can_be_turned_off():
    config = build("closed", 1, ["memory_check=false"])
    fits_or_raise(config, "fp16", total_memory=V100_16GB, device_name="V100", processes=1)


def test_the_estimate_scales_with_the_crop_and_the_precision():
    config = build("closed", 1, [])
    half = build("closed", 1, ["crop=112", "eval_resize=128"])
    assert estimate(half, "fp16", 256) < estimate(config, "fp16", 256) < estimate(config, "fp32", 256)
    assert estimate(config, "bf16", 256) == estimate(config, "fp16", 256)
