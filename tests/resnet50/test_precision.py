"""precision=auto and threads=auto per device generation (the workload conventions' table)."""

from __future__ import annotations

import pytest

from workloads.common.errors import SettingsError
from workloads.resnet50.precision import resolve

GPUS = {  # name: compute capability
    "V100": (7, 0), "T4": (7, 5), "A100": (8, 0), "A10": (8, 6), "L40": (8, 9), "H100": (9, 0), "H200": (9, 0),
}


@pytest.mark.parametrize(("gpu", "expected"), [
    ("V100", "fp16"), ("T4", "fp16"), ("A100", "bf16"), ("A10", "bf16"), ("L40", "bf16"), ("H100", "bf16"),
    ("H200", "bf16"),
])
def test_auto_on_each_gpu_generation(gpu, expected):
    resolved = resolve("auto", "cuda", GPUS[gpu], False, cpus=16, nproc=8)
    assert resolved.precision == expected and resolved.threads == 2
    assert ("GradScaler" in resolved.why) == (expected == "fp16")


@pytest.mark.parametrize("gpu", sorted(GPUS))
def test_fp32_and_fp16_are_honoured_on_every_gpu(gpu):
    assert resolve("fp32", "cuda", GPUS[gpu], False, cpus=4, nproc=1).precision == "fp32"
    assert resolve("none", "cuda", GPUS[gpu], False, cpus=4, nproc=1).precision == "fp32"
    assert resolve("fp16", "cuda", GPUS[gpu], False, cpus=4, nproc=1).precision == "fp16"


@pytest.mark.parametrize("gpu", ["V100", "T4"])
def test_forced_bf16_without_native_bf16_is_refused(gpu):
    with pytest.raises(SettingsError, match="compute capability 8.0"):
        resolve("bf16", "cuda", GPUS[gpu], False, cpus=4, nproc=1)


@pytest.mark.parametrize(("native", "requested", "expected"), [
    (False, "auto", "fp32"), (True, "auto", "bf16"), (False, "bf16", "bf16"), (True, "fp32", "fp32"),
    (False, "none", "fp32"),
])
def test_cpu_takes_bf16_only_where_native(native, requested, expected):
    resolved = resolve(requested, "cpu", None, native, cpus=2, nproc=1)
    assert resolved.precision == expected
    if requested == "bf16" and not native:
        assert "emulated" in resolved.why


def test_threads_divide_the_cpus_among_processes_and_can_be_forced():
    assert resolve("auto", "cpu", None, False, cpus=2, nproc=1).threads == 2
    assert resolve("auto", "cpu", None, False, cpus=2, nproc=4).threads == 1
    assert resolve("auto", "cpu", None, False, cpus=16, nproc=3).threads == 5
    assert resolve("auto", "cpu", None, False, cpus=16, nproc=3, threads=7).threads == 7


def test_unknown_precision_is_a_settings_error():
    with pytest.raises(SettingsError, match="invalid precision"):
        resolve("fp8", "cpu", None, False, cpus=2, nproc=1)
