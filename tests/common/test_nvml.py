"""The one NVML reader of workloads and benchmarks (workloads/common/nvml.py), through the NVML stand-in
(tests/hardware/fake_nvml.py): a CUDA device found by its PCI bus id, its clocks and power sampled
inside a ``with`` block only, nothing read on a CPU or where the driver does not answer."""

from __future__ import annotations

import sys
import time
from types import SimpleNamespace

import pytest
import torch

from tests.hardware.fake_nvml import FakeNvml
from workloads.common import nvml

CUDA1 = torch.device("cuda", 1)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeNvml:
    """NVML with two GPUs; CUDA's device 1 sits on the bus of NVML's second GPU (00000000:28:00.0)."""
    module = FakeNvml()
    monkeypatch.setitem(sys.modules, "pynvml", module)
    monkeypatch.setattr(torch.cuda, "get_device_properties",
                        lambda device: SimpleNamespace(pci_domain_id=0, pci_bus_id=0x28, pci_device_id=0))
    return module


def test_a_sampler_reads_the_gpu_on_the_devices_bus_inside_its_block_only(fake: FakeNvml):
    fake.trace["samples"][0][1].update(sm_clock_mhz=1300, power_w=250)
    sampler = nvml.GpuSampler(CUDA1, interval_s=0.01)
    assert sampler.static() == {"max_sm_clock_mhz": 1410, "max_mem_clock_mhz": 1593, "power_limit_w": 400.0,
                                "driver": fake.trace["driver_version"]}
    with sampler:
        time.sleep(0.1)
    taken = len(sampler.samples)
    time.sleep(0.05)
    assert taken >= 1 and len(sampler.samples) == taken  # nothing sampled after the block
    summary = sampler.summary()
    assert summary["sm_clock_mhz"] == 1300 and summary["power_w"] == 250 and summary["power_w_max"] == 250
    sampler.reset()
    assert sampler.summary() == {}


def test_the_state_now_names_the_gpu_on_the_devices_bus(fake: FakeNvml):
    state = nvml.gpu_state(CUDA1)
    assert state["name"] == fake.trace["devices"][1]["name"] and state["power_limit_w"] == 400.0
    assert fake.initialised == 0  # shut down after reading


def test_a_cpu_or_a_driver_that_does_not_answer_gives_no_readings(monkeypatch: pytest.MonkeyPatch, capsys):
    cpu = nvml.GpuSampler(torch.device("cpu"))
    with cpu:
        pass
    assert cpu.samples == [] and cpu.static() == {} and cpu.summary() == {}
    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml(missing_library=True))
    broken = nvml.GpuSampler(CUDA1)
    assert broken.static() == {} and "no clocks or power: NVML Shared Library Not Found" in capsys.readouterr().err
    assert nvml.gpu_state(CUDA1) == {"nvml_error": "NVML Shared Library Not Found"}
