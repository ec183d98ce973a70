"""The one precision rule (workloads/common/precision.py) and both workloads resolving through it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from workloads.common import devices
from workloads.common import precision as common
from workloads.common.errors import SettingsError
from workloads.resnet50 import precision as resnet50
from workloads.resnet50 import runtime as resnet50_runtime
from workloads.unet3d import precision as unet3d

ROOT = Path(__file__).resolve().parents[2]

# (compute capability, generation, what auto picks, native bf16, fp16 tensor cores, tf32, fp8)
TABLE = [
    ((6, 0), "Pascal", "fp32", False, False, False, False),  # P100
    ((6, 1), "Pascal", "fp32", False, False, False, False),  # P40, P4
    ((7, 0), "Volta", "fp16", False, True, False, False),  # V100
    ((7, 5), "Turing", "fp16", False, True, False, False),  # T4
    ((8, 0), "Ampere", "bf16", True, True, True, False),  # A100
    ((8, 6), "Ampere", "bf16", True, True, True, False),  # A10, A40
    ((8, 7), "Ampere", "bf16", True, True, True, False),  # Jetson Orin
    ((8, 9), "Ada", "bf16", True, True, True, True),  # L4, L40
    ((9, 0), "Hopper", "bf16", True, True, True, True),  # H100, H200
    ((10, 0), "Blackwell", "bf16", True, True, True, True),  # B200
    ((12, 0), "Blackwell", "bf16", True, True, True, True),  # RTX PRO 6000, RTX 50xx
]
CAPABILITIES = [row[0] for row in TABLE]


@pytest.mark.parametrize(("capability", "name", "expected", "bf16", "fp16_tc", "tf32", "fp8"), TABLE)
def test_each_gpu_generation_and_its_choice(capability, name, expected, bf16, fp16_tc, tf32, fp8):
    row = common.generation(capability)
    assert (row.name, row.native_bf16, row.fp16_tensor_cores, row.tf32, row.fp8) == (name, bf16, fp16_tc, tf32, fp8)
    choice = common.choose("auto", "cuda", capability)
    assert choice.precision == expected and choice.grad_scaler == (expected == "fp16")
    assert f"{capability[0]}.{capability[1]}" in choice.why and name in choice.why
    assert ("GradScaler" in choice.why) == (expected == "fp16")


def test_the_table_is_ordered_and_follows_the_thresholds():
    lows = [row.lowest for row in common.GENERATIONS]
    assert lows == sorted(lows)
    for row in common.GENERATIONS:
        assert row.native_bf16 == row.tf32 == (row.lowest >= (8, 0)), row.name
        assert row.fp16_tensor_cores == (row.lowest >= (7, 0)), row.name
        assert row.fp8 == (row.lowest >= (8, 9)), row.name


@pytest.mark.parametrize(("capability", "like"), [((8, 8), "Ampere"), ((13, 0), "Blackwell"), ((3, 7), "Maxwell"),
                                                  ((7, 1), "Volta")])
def test_an_unlisted_capability_takes_the_generation_below_it(capability, like):
    row = common.generation(capability)
    assert like in row.name and "unlisted" in row.name
    nearest = next(g for g in common.GENERATIONS if g.name == like)
    features = ("native_bf16", "fp16_tensor_cores", "tf32", "fp8")
    assert [getattr(row, f) for f in features] == [getattr(nearest, f) for f in features]


@pytest.mark.parametrize("capability", [(6, 0), (7, 0), (7, 5)])
def test_bf16_is_refused_where_it_would_be_emulated(capability):
    with pytest.raises(common.UnsupportedPrecision, match="no native bf16"):
        common.choose("bf16", "cuda", capability)


@pytest.mark.parametrize(("native", "requested", "expected"), [
    (False, "auto", "fp32"), (True, "auto", "bf16"), (False, "bf16", "bf16"), (True, "fp32", "fp32"),
    (False, "none", "fp32"), (False, "fp16", "fp16"),
])
def test_the_cpu_keeps_bf16_for_native_hardware(native, requested, expected):
    choice = common.choose(requested, "cpu", None, native)
    assert choice.precision == expected
    assert ("emulated" in choice.why) == (not native and requested in ("auto", "bf16"))


@pytest.mark.parametrize(("text", "flags"), [
    ("processor\t: 0\nflags\t\t: fpu avx2 avx512f avx512bw avx512_vnni\n", ()),  # Cascade Lake: emulated bf16
    ("flags\t\t: fpu avx512f avx512_bf16 amx_tile amx_bf16 amx_int8\n", ("avx512_bf16", "amx_bf16")),  # Sapphire R.
    ("flags\t\t: fpu avx2 avx512f avx512_bf16\n", ("avx512_bf16",)),  # Zen 4
    ("processor\t: 0\nFeatures\t: fp asimd sve bf16 i8mm\n", ("bf16",)),  # Neoverse V1
    ("processor\t: 0\nFeatures\t: fp asimd\n", ()),  # Neoverse N1
    ("", ()),
])
def test_native_cpu_bf16_is_read_from_the_flags(tmp_path: Path, text, flags):
    assert common.cpu_bf16_flags(text) == flags
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(text)
    assert common.cpu_bf16_native(cpuinfo) == bool(flags)
    assert common.cpu_bf16_native(tmp_path / "absent") is False


def test_unknown_precisions_are_named():
    with pytest.raises(common.UnknownPrecision, match="invalid precision 'fp8': one of auto, fp32"):
        common.choose("fp8", "cpu")
    with pytest.raises(ValueError, match="compute capability"):
        common.choose("auto", "cuda", None)


def test_the_rule_imports_without_torch():
    code = ("import sys; sys.modules['torch'] = None\n"  # any `import torch` now fails
            "from workloads.common import precision as p\n"
            "print(p.choose('auto', 'cuda', (7, 5)).precision, 'torch' in sys.modules and sys.modules['torch'])")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["fp16", "None"]


def _unet3d(requested: str, device: str, capability, native: bool) -> str:
    try:
        return unet3d.resolve(requested, device, capability, native, 8, 1).precision
    except SettingsError as exc:
        return f"refused: {type(exc).__name__}"


def _resnet50(requested: str, device: str, capability, native: bool) -> str:
    try:
        return resnet50.resolve(requested, device, capability, native, 8, 1).precision
    except SettingsError as exc:
        return f"refused: {type(exc).__name__}"


DEVICES = [("cuda", capability, False) for capability in CAPABILITIES] + [("cpu", None, False), ("cpu", None, True)]


@pytest.mark.parametrize(("device", "capability", "native"), DEVICES,
                         ids=[f"{d}-{c[0]}.{c[1]}" if c else f"{d}-native{n}" for d, c, n in DEVICES])
@pytest.mark.parametrize("requested", ["auto", "fp32", "none", "fp16", "bf16"])
def test_both_workloads_resolve_the_same_choice_on_the_same_device(device, capability, native, requested):
    unet = _unet3d(requested, device, capability, native)
    resnet = _resnet50(requested, device, capability, native)
    assert unet.split(":")[0] == resnet.split(":")[0], (unet, resnet)
    if not unet.startswith("refused"):
        assert unet == common.choose(requested, device, capability, native).precision


def test_both_workloads_read_the_cpu_through_the_rule():
    """One probe of native bf16 on a CPU: the rule's, as every workload reads it."""
    assert unet3d.cpu_bf16_native is common.cpu_bf16_native
    assert resnet50_runtime.device_facts is devices.device_facts
    assert devices.device_facts(torch.device("cpu")).cpu_bf16_native is common.cpu_bf16_native()
