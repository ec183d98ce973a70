"""Telemetry: GPU sources (NVML through a recorded trace), the sampler thread, energy and hints."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from orchestrator.insight.telemetry import (
    GPU_FIELDS,
    HostProbe,
    NoGpuSource,
    NvmlGpuSource,
    TelemetrySampler,
    TraceGpuSource,
    load_series,
    open_gpu_source,
    record_gpu_trace,
    throttle_reasons,
)
from orchestrator.insight.telemetry_summary import energy_to_train, summarize
from tests.hardware.fake_nvml import TRACE, FakeNvml


def fake_proc(root: Path, *, busy: int = 100, idle: int = 900, read_sectors: int = 0, io_ms: int = 0) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "stat").write_text(f"cpu  {busy} 0 0 {idle} 0 0 0 0 0 0\ncpu0 1 0 0 1 0 0 0 0 0 0\n")
    (root / "meminfo").write_text("MemTotal:       16000000 kB\nMemAvailable:    6000000 kB\n")
    (root / "diskstats").write_text(
        f" 259       0 nvme0n1 100 0 {read_sectors} 10 5 0 40 3 0 {io_ms} 13 0 0 0 0\n"
        " 7       0 loop0 1 0 8 0 0 0 0 0 0 0 0 0 0 0 0\n"
    )
    return root


def series(power_w: list[float], *, t0: int = 0, step_ms: int = 1000, gpus: int = 2,
           counter: bool = False, util: list[float] | None = None, cpu: list[float] | None = None,
           disk_busy: list[float] | None = None, throttle: list[int] | None = None) -> dict:
    n = len(power_w)
    gpu_columns = []
    for _ in range(gpus):
        energy, running = [], 1_000_000.0
        for k in range(n):
            if k:
                running += (power_w[k] + power_w[k - 1]) / 2 * step_ms
            energy.append(running)
        gpu_columns.append({
            "util_pct": util or [95.0] * n, "memory_used_bytes": [2**30] * n, "power_w": list(power_w),
            "temperature_c": [60.0] * n, "sm_clock_mhz": [1410.0] * n, "throttle_bits": throttle or [0] * n,
            "energy_mj": energy if counter else [None] * n,
        })
    return {
        "version": 1, "interval_s": step_ms / 1000, "gpu_source": {"available": True, "devices": ["x"] * gpus},
        "dataset_device": "nvme0n1",
        "host": {"t_ms": [t0 + k * step_ms for k in range(n)], "cpu_pct": cpu or [20.0] * n,
                 "iowait_pct": [0.0] * n, "memory_used_bytes": [2**33] * n,
                 "disk_read_bytes_per_s": [1e6] * n, "disk_busy_pct": disk_busy or [5.0] * n},
        "gpus": gpu_columns, "sampling_errors": [],
    }


# ---------------------------------------------------------------- sources


def test_nvml_source_reads_the_recorded_trace_like_the_trace_source() -> None:
    trace = json.loads(TRACE.read_text())
    nvml = FakeNvml(trace)
    live, replay = NvmlGpuSource(nvml), TraceGpuSource(trace)
    assert live.describe() == {"available": True, "devices": ["NVIDIA A100-SXM4-80GB"] * 2}
    for _ in trace["samples"]:
        assert live.sample() == replay.sample()
        nvml.advance()
    first = TraceGpuSource(trace).sample()[0]
    assert (first.power_w, first.util_pct, first.throttle_bits) == (60, 0, 1)
    live.close()
    assert nvml.initialised == 0


def test_unsupported_nvml_readings_are_none_not_zero() -> None:
    trace = json.loads(TRACE.read_text())
    trace["samples"][0][1]["power_w"] = None
    sample = NvmlGpuSource(FakeNvml(trace)).sample()
    assert sample[1].power_w is None and sample[0].power_w == 60


def test_no_driver_gives_a_source_that_says_why() -> None:
    source = open_gpu_source(FakeNvml(missing_library=True))
    assert isinstance(source, NoGpuSource)
    assert source.describe() == {"available": False, "reason": "NVIDIA driver not loaded (libnvidia-ml.so not found)"}
    assert source.sample() == []


def test_recorded_trace_replays() -> None:
    nvml = FakeNvml()
    recorded = record_gpu_trace(NvmlGpuSource(nvml), samples=3, interval_s=0.0)
    assert len(recorded["samples"]) == 3 and len(recorded["samples"][0]) == 2
    assert TraceGpuSource(recorded).sample()[0].power_w == 60


def test_throttle_bits_decode() -> None:
    assert throttle_reasons(0x4 | 0x40) == ["sw_power_cap", "hw_thermal_slowdown"]
    assert throttle_reasons(0) == []


# ---------------------------------------------------------------- sampler


def test_sampler_writes_a_compact_series(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path / "proc")
    path = tmp_path / "seed" / "telemetry.json"
    source = TraceGpuSource(json.loads(TRACE.read_text()))
    probe = HostProbe("nvme0n1", proc)
    sampler = TelemetrySampler(path, tmp_path, interval_s=0.02, gpu_source=source, host_probe=probe)
    with sampler:
        time.sleep(0.05)
        fake_proc(proc, busy=300, idle=1100, read_sectors=2048, io_ms=500)  # counters move
        time.sleep(0.08)
    stored = load_series(path)
    n = len(stored["host"]["t_ms"])
    assert n >= 3
    assert all(len(column) == n for column in stored["host"].values())
    assert len(stored["gpus"]) == 2 and all(len(g[f]) == n for g in stored["gpus"] for f in GPU_FIELDS)
    assert stored["host"]["cpu_pct"][0] is None  # no previous sample to difference against
    assert stored["host"]["memory_used_bytes"][0] == 10_000_000 * 1024
    assert max(r for r in stored["host"]["disk_read_bytes_per_s"] if r is not None) > 0
    assert 50.0 in stored["host"]["cpu_pct"]  # 200 busy of 400 jiffies
    assert stored["dataset_device"] == "nvme0n1"
    assert path.read_text().count("\n") == 1  # one compact line


def test_sampler_on_this_host_says_when_there_is_no_gpu(tmp_path: Path) -> None:
    source = open_gpu_source()
    if not isinstance(source, NoGpuSource):
        pytest.skip("this machine has a working NVIDIA driver")
    path = tmp_path / "telemetry.json"
    with TelemetrySampler(path, tmp_path, interval_s=0.05):
        sum(i * i for i in range(200_000))
        time.sleep(0.12)
    stored = load_series(path)
    assert stored["gpu_source"]["available"] is False and "driver" in stored["gpu_source"]["reason"]
    assert stored["gpus"] == []
    assert any(v is not None for v in stored["host"]["cpu_pct"])


def test_sampler_rejects_bad_interval(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="interval_s"):
        TelemetrySampler(tmp_path / "t.json", tmp_path, interval_s=0)


# ---------------------------------------------------------------- energy and summary


def test_energy_integrates_power_between_run_start_and_stop() -> None:
    data = series([300.0] * 11)  # t = 0 .. 10 s, two GPUs at 300 W
    energy = energy_to_train(data, 2500, 7500)
    assert energy.method == "integrated power"
    assert energy.joules == pytest.approx(2 * 300 * 5.0)
    assert energy.mean_power_w == pytest.approx(600.0) and energy.peak_power_w == 600.0
    assert energy.coverage == 1.0
    assert energy.kwh == pytest.approx(3000 / 3.6e6)


def test_energy_prefers_the_board_counter() -> None:
    ramp = [100.0 + 10 * k for k in range(11)]
    data = series(ramp, counter=True)
    by_counter = energy_to_train(data, 0, 10000)
    data_without = series(ramp, counter=False)
    by_power = energy_to_train(data_without, 0, 10000)
    assert by_counter.method == "energy counter" and by_power.method == "integrated power"
    assert by_counter.joules == pytest.approx(by_power.joules)
    assert by_counter.joules == pytest.approx(2 * (100 + 200) / 2 * 10)


def test_energy_of_the_recorded_trace_agrees_between_methods() -> None:
    trace = json.loads(TRACE.read_text())
    steps = trace["samples"]
    data = series([0.0] * len(steps), gpus=2)
    for g in range(2):
        data["gpus"][g]["power_w"] = [s[g]["power_w"] for s in steps]
        data["gpus"][g]["energy_mj"] = [s[g]["energy_mj"] for s in steps]
    counted = energy_to_train(data, 1000, 10000)
    for g in range(2):
        data["gpus"][g]["energy_mj"] = [None] * len(steps)
    integrated = energy_to_train(data, 1000, 10000)
    assert counted.method == "energy counter" and integrated.method == "integrated power"
    assert counted.joules == pytest.approx(integrated.joules, rel=1e-9)
    assert counted.peak_power_w == 799


def test_energy_is_unknown_when_samples_do_not_cover_the_run() -> None:
    energy = energy_to_train(series([300.0] * 5), 0, 10000)  # samples cover 0..4 s of 10 s
    assert energy.joules is None and "40%" in energy.method


def test_energy_without_gpus_says_why() -> None:
    data = series([0.0] * 5, gpus=0)
    data["gpu_source"] = {"available": False, "reason": "NVIDIA driver not loaded"}
    energy = energy_to_train(data, 0, 4000)
    assert energy.joules is None and "NVIDIA driver not loaded" in energy.method


def test_energy_rejects_a_window_that_runs_backwards() -> None:
    with pytest.raises(ValueError):
        energy_to_train(series([1.0] * 3), 2000, 1000)


def test_summary_reports_throttling_and_a_cpu_bottleneck() -> None:
    n = 10
    data = series([300.0] * n, util=[10.0] * 6 + [95.0] * 4, cpu=[97.0] * 6 + [40.0] * 4,
                  throttle=[0x4] * 2 + [0x1] * 3 + [0] * 5)
    summary = summarize(data, 0, 9000)
    assert summary.throttling == {"sw_power_cap": 0.2}  # gpu_idle is not throttling
    assert summary.bottleneck.startswith("CPU") and "60%" in summary.bottleneck
    assert summary.gpu_util_mean_pct == pytest.approx(44.0)
    assert summary.to_json()["energy"]["kwh"] == pytest.approx(summary.energy.joules / 3.6e6)


def test_summary_hints_at_storage_and_at_nothing() -> None:
    n = 10
    storage = summarize(series([300.0] * n, util=[5.0] * n, disk_busy=[99.0] * n), 0, 9000)
    assert storage.bottleneck.startswith("dataset storage")
    assert summarize(series([300.0] * n), 0, 9000).bottleneck == "none seen"


def test_a_failing_source_never_fails_the_seed(tmp_path: Path) -> None:
    class Broken(NoGpuSource):
        def sample(self) -> list:
            raise RuntimeError("driver went away")

    path = tmp_path / "telemetry.json"
    with TelemetrySampler(path, tmp_path, interval_s=0.02, gpu_source=Broken("x"),
                          host_probe=HostProbe(None, fake_proc(tmp_path / "proc"))):
        time.sleep(0.06)
    stored = load_series(path)
    assert stored["host"]["t_ms"] == []
    assert stored["sampling_errors"] and "driver went away" in stored["sampling_errors"][0]
