"""precision/threads/NPROC ``auto``: a table of GPU generations and CPUs, the machine probes, the logged settings."""

from __future__ import annotations

import pytest
import torch

from workloads.common.errors import SettingsError
from workloads.unet3d import precision as P
from workloads.unet3d.settings import auto_workers, resolve_settings

# (GPU, compute capability, what auto picks)
GPUS = [
    ("V100", (7, 0), "fp16"),
    ("T4", (7, 5), "fp16"),
    ("A100", (8, 0), "bf16"),
    ("A10", (8, 6), "bf16"),
    ("L40", (8, 9), "bf16"),
    ("H100", (9, 0), "bf16"),
    ("H200", (9, 0), "bf16"),
    ("P100", (6, 0), "fp32"),
]


@pytest.mark.parametrize("gpu, capability, expected", GPUS)
def test_auto_precision_per_gpu_generation(gpu, capability, expected):
    resolved = P.resolve("auto", "cuda", capability, cpu_bf16_native=False, cpus=16, nproc=1)
    assert resolved.precision == expected, gpu
    assert f"{capability[0]}.{capability[1]}" in resolved.why
    assert resolved.threads == 16


@pytest.mark.parametrize("gpu, capability", [(g, c) for g, c, _ in GPUS])
@pytest.mark.parametrize("forced", ["fp32", "fp16"])
def test_a_forced_precision_is_kept_on_every_gpu(gpu, capability, forced):
    assert P.resolve(forced, "cuda", capability, False, 8, 1).precision == forced


@pytest.mark.parametrize("gpu, capability", [("V100", (7, 0)), ("T4", (7, 5)), ("P100", (6, 0))])
def test_forced_bf16_on_a_gpu_without_native_bf16_is_refused(gpu, capability):
    with pytest.raises(SettingsError, match="no native bf16"):
        P.resolve("bf16", "cuda", capability, False, 8, 1)


def test_forced_bf16_is_kept_where_native():
    assert P.resolve("bf16", "cuda", (8, 0), False, 8, 1).precision == "bf16"


@pytest.mark.parametrize(
    "native, requested, expected",
    [(False, "auto", "fp32"), (True, "auto", "bf16"), (False, "bf16", "bf16"), (True, "fp32", "fp32"),
     (False, "none", "fp32")],
)
def test_cpu_uses_bf16_only_where_native_unless_forced(native, requested, expected):
    assert P.resolve(requested, "cpu", None, native, 2, 1).precision == expected


@pytest.mark.parametrize("cpus, nproc, threads, expected", [(2, 1, None, 2), (16, 4, None, 4), (3, 2, None, 1),
                                                            (1, 8, None, 1), (16, 1, 3, 3)])
def test_threads_are_the_usable_cpus_shared_by_the_processes(cpus, nproc, threads, expected):
    assert P.resolve("auto", "cpu", None, False, cpus, nproc, threads).threads == expected


def test_bad_precision_names_the_choices():
    with pytest.raises(ValueError, match="auto, fp32"):
        P.normalise("fp8")


# (usable CPUs of the process, local ranks, device kind) -> loader workers per rank
WORKERS = [
    (16, 8, "cuda", 2),  # 16-core 8-GPU node: 2 CPUs a rank, less the training process = 1, raised to the floor
    (16, 1, "cuda", 8),  # one GPU with 16 CPUs: capped at the reference's 8
    (4, 1, "cuda", 3),  # a small workstation: every CPU but the training process's
    (1, 1, "cuda", 2),  # one CPU: still the floor
    (2, 1, "cuda", 2),
    (24, 8, "cuda", 2),
    (64, 8, "cuda", 7),
    (128, 8, "cuda", 8),
    (256, 8, "cuda", 8),  # DGX H100 (2 x 64 cores, HT): 32 a rank, capped
    (32, 4, "cuda", 7),
    (16, 1, "cpu", 0),  # on a CPU the training process needs every core
    (2, 1, "cpu", 0),
    (64, 8, "cpu", 0),
]


@pytest.mark.parametrize("cpus, local_ranks, device, expected", WORKERS)
def test_loader_workers_auto(cpus, local_ranks, device, expected):
    assert auto_workers(device, cpus, local_ranks).count == expected


@pytest.mark.parametrize("cpus, local_ranks, device, expected", WORKERS)
def test_loader_workers_auto_says_why(cpus, local_ranks, device, expected):
    why = auto_workers(device, cpus, local_ranks).why
    assert f"{expected} " in why and (device == "cpu" or f"{cpus} CPUs / {local_ranks} local rank" in why)


def test_resolved_settings_on_an_8_gpu_node_log_the_workers_and_their_basis(monkeypatch):
    monkeypatch.setattr(P, "cuda_capability", lambda device: (9, 0))
    monkeypatch.setattr(P, "device_name", lambda device: "NVIDIA H100 80GB HBM3")
    monkeypatch.setattr(P, "usable_cpus", lambda: 16)  # what sched_getaffinity and the cgroup quota allow
    settings = resolve_settings(device=torch.device("cuda", 0), requested_precision="auto", threads=None, nproc=8,
                                channels_last=None, compile_model=False, num_workers=None, eval_batch=None)
    value = settings.log_value()
    assert (value["num_workers"], value["cpus"], value["nproc"]) == (2, 16, 8)
    assert "16 CPUs / 8 local ranks" in value["workers_why"]
    forced = resolve_settings(device=torch.device("cuda", 0), requested_precision="auto", threads=None, nproc=8,
                              channels_last=None, compile_model=False, num_workers=5, eval_batch=None, cpus=16)
    assert forced.num_workers == 5 and forced.log_value()["workers_why"] == "5 as asked"


def test_resolved_settings_on_this_cpu_and_their_log_value():
    settings = resolve_settings(device=torch.device("cpu"), requested_precision="auto", threads=None, nproc=2,
                                channels_last=None, compile_model=False, num_workers=None, eval_batch=None, cpus=4)
    assert settings.threads == 2 and settings.num_workers == 0 and settings.eval_batch == 1
    assert not settings.channels_last and not settings.pin_memory and not settings.grad_scaler
    value = settings.log_value()
    required = {"precision", "requested_precision", "threads", "nproc", "device", "device_name", "capability",
                "channels_last", "compile", "why"}
    assert required <= set(value)
    assert value["device"] == "cpu" and value["capability"] is None and value["requested_precision"] == "auto"
    assert value["precision"] == ("bf16" if P.cpu_bf16_native() else "fp32")


def test_resolved_settings_on_a_gpu(monkeypatch):
    monkeypatch.setattr(P, "cuda_capability", lambda device: (7, 5))
    monkeypatch.setattr(P, "device_name", lambda device: "Tesla T4")
    settings = resolve_settings(device=torch.device("cuda", 0), requested_precision="auto", threads=None, nproc=1,
                                channels_last=None, compile_model=True, num_workers=None, eval_batch=None, cpus=16)
    assert (settings.precision, settings.grad_scaler, settings.num_workers, settings.eval_batch) == ("fp16", True, 8, 4)
    assert settings.channels_last and settings.pin_memory  # compiled: one layout end to end
    assert settings.log_value()["capability"] == "7.5" and settings.log_value()["device_name"] == "Tesla T4"
    eager = resolve_settings(device=torch.device("cuda", 0), requested_precision="fp32", threads=2, nproc=1,
                             channels_last=None, compile_model=False, num_workers=None, eval_batch=None, cpus=16)
    assert not eager.channels_last and eager.precision == "fp32" and eager.threads == 2
    forced = resolve_settings(device=torch.device("cuda", 0), requested_precision="auto", threads=None, nproc=1,
                              channels_last=True, compile_model=False, num_workers=2, eval_batch=1, cpus=16)
    assert forced.channels_last and (forced.num_workers, forced.eval_batch) == (2, 1)
