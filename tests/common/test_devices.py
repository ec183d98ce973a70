"""The kit's device facts (workloads/common/devices.py): names, capability, NPROC=auto, the device a
run asks for. unet3d named a CPU without a ``model name`` line in /proc/cpuinfo (Arm: Grace,
Graviton) 'cpu' in resolved_settings and submission_platform; resnet50 named it by its machine."""

from __future__ import annotations

import platform
from pathlib import Path

import pytest
import torch

from workloads.common import devices, precision
from workloads.common.errors import SettingsError

X86 = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 9654 96-Core Processor\nflags\t\t: fpu\n"
ARM = "processor\t: 0\nBogoMIPS\t: 2000.00\nFeatures\t: fp asimd sve bf16\nCPU implementer\t: 0x41\n"


def test_the_cpu_s_model_name(tmp_path: Path, monkeypatch):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(X86)
    assert devices.cpu_name(cpuinfo) == "AMD EPYC 9654 96-Core Processor"
    monkeypatch.setattr(platform, "processor", lambda: "")
    monkeypatch.setattr(platform, "machine", lambda: "aarch64")
    cpuinfo.write_text(ARM)
    assert devices.cpu_name(cpuinfo) == "aarch64"
    assert devices.cpu_name(tmp_path / "absent") == "aarch64"
    monkeypatch.setattr(platform, "machine", lambda: "")
    assert devices.cpu_name(cpuinfo) == "cpu"


def test_both_workloads_name_the_device_the_same_way(monkeypatch):
    from workloads.unet3d import precision as unet3d

    monkeypatch.setattr(devices, "cpu_name", lambda cpuinfo=devices.CPUINFO: "aarch64")
    cpu = torch.device("cpu")
    assert unet3d.device_name(cpu) == devices.device_facts(cpu).name == "aarch64"


def test_the_facts_of_this_cpu():
    facts = devices.device_facts(torch.device("cpu"))
    assert (facts.kind, facts.capability, facts.capability_text, facts.total_memory) == ("cpu", None, None, None)
    assert facts.cpu_bf16_native == precision.cpu_bf16_native() and facts.name == devices.cpu_name()
    assert devices.cuda_capability(torch.device("cpu")) is None


def test_the_facts_of_a_gpu(monkeypatch):
    class Properties:
        total_memory = 80 * 2**30

    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device: (9, 0))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device: "NVIDIA H100 80GB HBM3")
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: Properties())
    facts = devices.device_facts(torch.device("cuda", 0))
    assert (facts.kind, facts.name, facts.capability, facts.capability_text) == ("cuda", "NVIDIA H100 80GB HBM3",
                                                                                 (9, 0), "9.0")
    assert facts.total_memory == 80 * 2**30 and not facts.cpu_bf16_native


def test_nproc_auto_is_one_per_visible_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 8)
    assert devices.auto_nproc() == 8
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert devices.auto_nproc() == 1


def test_the_nproc_command_line(capsys):
    assert devices.main(["nproc"]) == 0
    assert int(capsys.readouterr().out) >= 1
    assert devices.main([]) == 2
    assert "usage" in capsys.readouterr().err


def test_the_device_a_run_asks_for(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert (devices.pick_device("auto"), devices.pick_device("cpu")) == ("cpu", "cpu")
    with pytest.raises(SettingsError, match="sees no CUDA device"):
        devices.pick_device("cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert (devices.pick_device("auto"), devices.pick_device("cuda"), devices.pick_device("cpu")) == (
        "cuda", "cuda", "cpu")
