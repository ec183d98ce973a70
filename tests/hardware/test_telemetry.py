"""Telemetry: GPU sources (NVML through a recorded trace), the sampler thread, energy and hints."""

from __future__ import annotations

import json
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from orchestrator.insight.gpu_source import GPU_FIELDS, NoGpuSource, NvmlGpuSource, open_gpu_source
from orchestrator.insight.gpu_trace import TraceGpuSource, record_gpu_trace
from orchestrator.insight.host_probe import HostProbe
from orchestrator.insight.telemetry import TelemetrySampler, load_node_series, load_series
from orchestrator.insight.telemetry_summary import HERE, energy_to_train, seed_energy, summarize
from orchestrator.insight.throttle import throttle_reasons
from tests.hardware.fake_nvml import TRACE, FakeNvml, LegacyFakeNvml, eight_gpu_trace, node_trace


class FakeCounters:
    """psutil's API for HostProbe, with counters a test moves (times in seconds, as psutil gives)."""

    def __init__(self, *, busy: float = 1.0, idle: float = 9.0, read_bytes: int = 0, busy_ms: int = 0) -> None:
        self.set(busy=busy, idle=idle, read_bytes=read_bytes, busy_ms=busy_ms)

    def set(self, *, busy: float, idle: float, read_bytes: int, busy_ms: int) -> None:
        self.busy, self.idle, self.read_bytes, self.busy_ms = busy, idle, read_bytes, busy_ms

    def cpu_times(self) -> SimpleNamespace:
        return SimpleNamespace(user=self.busy, nice=0.0, system=0.0, idle=self.idle, iowait=0.0, irq=0.0,
                               softirq=0.0, steal=0.0, guest=0.0, guest_nice=0.0)

    def virtual_memory(self) -> SimpleNamespace:
        return SimpleNamespace(total=16_000_000 * 1024, available=6_000_000 * 1024)

    def disk_io_counters(self, perdisk: bool = False) -> dict[str, SimpleNamespace]:
        assert perdisk
        return {"nvme0n1": SimpleNamespace(read_bytes=self.read_bytes, busy_time=self.busy_ms),
                "loop0": SimpleNamespace(read_bytes=4096, busy_time=0)}


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
    assert live.describe() == {"available": True, "devices": ["NVIDIA A100-SXM4-80GB"] * 2,
                               "pci_bus_ids": ["00000000:18:00.0", "00000000:28:00.0"]}
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


def test_reason_bits_come_from_the_nvml_module_constants() -> None:
    import pynvml

    assert throttle_reasons(pynvml.nvmlClocksEventReasonSwPowerCap) == ["sw_power_cap"]
    moved = SimpleNamespace(nvmlClocksEventReasonSwPowerCap=0x400, nvmlClocksThrottleReasonHwSlowdown=0x800)
    assert throttle_reasons(0x400 | 0x800 | 0x4, moved) == ["sw_power_cap", "hw_slowdown"]


def test_clocks_event_reasons_use_the_new_call_and_fall_back_to_the_deprecated_one() -> None:
    new, legacy = FakeNvml(), LegacyFakeNvml()
    first = [NvmlGpuSource(nvml).sample()[0].throttle_bits for nvml in (new, legacy)]
    assert first == [1, 1]
    assert new.deprecated_calls == 0 and legacy.deprecated_calls == 2  # one read per GPU
    assert throttle_reasons(0x4, legacy) == ["sw_power_cap"]


def test_host_probe_reads_this_host_through_psutil(tmp_path: Path) -> None:
    import psutil

    disk = next(iter(psutil.disk_io_counters(perdisk=True) or {}), None)
    first = HostProbe(disk).read()
    sum(i * i for i in range(300_000))
    second = HostProbe(disk).read()
    assert second.cpu_total_s > first.cpu_total_s and second.cpu_busy_s >= first.cpu_busy_s
    assert 0 < second.memory_used_bytes < psutil.virtual_memory().total
    if disk is not None:
        assert second.disk_read_bytes is not None and second.disk_read_bytes >= first.disk_read_bytes


# ---------------------------------------------------------------- only the run's GPUs (issue 15)


def _sample_eight_gpu_host(tmp_path: Path, gpus: tuple[str, ...] | None) -> dict:
    nvml = FakeNvml(eight_gpu_trace(busy=(2, 5)))
    source = open_gpu_source(nvml, gpus)
    path = tmp_path / f"telemetry-{gpus}.json"
    probe = HostProbe(None, FakeCounters())
    with TelemetrySampler(path, tmp_path, interval_s=0.01, gpu_source=source, host_probe=probe):
        for _ in range(11):
            time.sleep(0.012)
            nvml.advance()
    return load_series(path)


def test_telemetry_samples_only_the_runs_gpus_on_an_eight_gpu_host(tmp_path: Path) -> None:
    whole = _sample_eight_gpu_host(tmp_path, None)
    by_index = _sample_eight_gpu_host(tmp_path, ("2", "5"))
    by_uuid = _sample_eight_gpu_host(tmp_path, ("GPU-fake-0002", "GPU-fake-0005"))
    assert len(whole["gpus"]) == 8 and len(by_index["gpus"]) == 2 and len(by_uuid["gpus"]) == 2
    assert by_index["gpu_source"]["selected"] == ["2", "5"]
    for stored in (by_index, by_uuid):
        assert {u for g in stored["gpus"] for u in g["util_pct"]} == {95.0}
    start, stop = by_index["host"]["t_ms"][0], by_index["host"]["t_ms"][-1]
    run = summarize(by_index, start, stop)
    host = summarize(whole, whole["host"]["t_ms"][0], whole["host"]["t_ms"][-1])
    assert run.systems[HERE].gpu_util_mean_pct == 95.0 and run.systems[HERE].bottleneck == "none seen"
    assert run.energy.mean_power_w == pytest.approx(800.0, rel=0.05)  # two GPUs at 400 W
    # What issue 15 saw when every GPU of the host was read: the six idle ones drown the two busy ones.
    assert host.systems[HERE].gpu_util_mean_pct == pytest.approx(23.75)
    assert host.systems[HERE].bottleneck.startswith("GPUs idle")
    assert host.energy.mean_power_w == pytest.approx(2 * 400 + 6 * 60, rel=0.05)


def test_a_run_given_no_gpu_samples_none(tmp_path: Path) -> None:
    source = open_gpu_source(FakeNvml(eight_gpu_trace()), ())
    assert isinstance(source, NoGpuSource) and "no GPU" in source.describe()["reason"]


def test_a_lost_gpu_is_named_with_its_reason_and_the_others_sampled() -> None:
    """Issue 18: a GPU that fell off the bus, or one outside the job's cgroup, is not "not found"."""
    for at in ("handle", "queries"):
        trace = node_trace(["NVIDIA H100 80GB HBM3"] * 3, faults={0: {"error": "GpuIsLost", "at": at}})
        source = open_gpu_source(FakeNvml(trace), None)
        described = source.describe()
        assert described["unavailable"] == {"0": "GPU is lost (fell off the bus or lost power: Xid 79): drain the"
                                                  " node, then reset or reseat the GPU"}, at
        assert "not_found" not in described and described["devices"] == ["NVIDIA H100 80GB HBM3"] * 2
        assert len(source.sample()) == 2


def test_the_runs_gpus_are_found_by_pci_bus_id_not_by_nvml_index() -> None:
    """Issue 18: CUDA numbers GPUs in PCI bus order (mltrain sets CUDA_DEVICE_ORDER=PCI_BUS_ID); NVML's own
    index order is not promised to be that. A node whose NVML index 0 sits in the later slot: the run's
    GPU 0 (CUDA_VISIBLE_DEVICES=0) is NVML's GPU 1. A UUID names its GPU whatever the order."""
    trace = node_trace(["NVIDIA L4", "NVIDIA H100 80GB HBM3"], pci_bus_ids=["00000000:3B:00.0", "00000000:1B:00.0"])
    by_cuda_index = open_gpu_source(FakeNvml(trace), ("0",))
    assert by_cuda_index.describe()["devices"] == ["NVIDIA H100 80GB HBM3"]
    assert by_cuda_index.describe()["pci_bus_ids"] == ["00000000:1B:00.0"]
    by_nvml_index = open_gpu_source(FakeNvml(trace), ("0",), numbering="nvml")  # what Docker's device ids are
    assert by_nvml_index.describe()["devices"] == ["NVIDIA L4"]
    by_uuid = open_gpu_source(FakeNvml(trace), (trace["devices"][0]["uuid"],))
    assert by_uuid.describe()["devices"] == ["NVIDIA L4"]


def test_an_unknown_device_is_named_not_fatal() -> None:
    source = open_gpu_source(FakeNvml(eight_gpu_trace()), ("1", "GPU-nope", "9"))
    assert source.describe()["not_found"] == ["GPU-nope", "9"] and len(source.sample()) == 1


# ---------------------------------------------------------------- sampler


def test_sampler_writes_a_compact_series(tmp_path: Path) -> None:
    counters = FakeCounters()
    path = tmp_path / "seed" / "telemetry.json"
    source = TraceGpuSource(json.loads(TRACE.read_text()))
    probe = HostProbe("nvme0n1", counters)
    sampler = TelemetrySampler(path, tmp_path, interval_s=0.02, gpu_source=source, host_probe=probe)
    with sampler:
        time.sleep(0.05)
        counters.set(busy=3.0, idle=11.0, read_bytes=2048 * 512, busy_ms=500)  # counters move
        time.sleep(0.08)
    stored = load_series(path)
    n = len(stored["host"]["t_ms"])
    assert n >= 3
    assert all(len(column) == n for column in stored["host"].values())
    assert len(stored["gpus"]) == 2 and all(len(g[f]) == n for g in stored["gpus"] for f in GPU_FIELDS)
    assert stored["host"]["cpu_pct"][0] is None  # no previous sample to difference against
    assert stored["host"]["memory_used_bytes"][0] == 10_000_000 * 1024
    assert max(r for r in stored["host"]["disk_read_bytes_per_s"] if r is not None) > 0
    assert 50.0 in stored["host"]["cpu_pct"]  # 2 s busy of 4 s
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


def test_energy_is_scipy_integrate_trapezoid_to_the_last_bit() -> None:
    """Energy is numpy's trapezoid (no scipy.integrate import): the same number scipy's gives."""
    from scipy import integrate

    from orchestrator.insight.telemetry_summary import TRAPEZOID

    rng = np.random.default_rng(36)
    for n in (2, 3, 17, 1000, 86_400):
        t = np.cumsum(rng.uniform(0.2, 2.0, n)) * 1000
        power = rng.uniform(0, 1000, n)
        assert TRAPEZOID(power, t / 1000) == integrate.trapezoid(power, t / 1000)
    ramp = series([100.0 + 10 * k for k in range(11)])
    assert energy_to_train(ramp, 500, 9700).joules > 0


def test_energy_is_unknown_when_samples_do_not_cover_the_run() -> None:
    energy = energy_to_train(series([300.0] * 5), 0, 10000)  # samples cover 0..4 s of 10 s
    assert energy.joules is None and "40%" in energy.method


def test_energy_without_gpus_says_why() -> None:
    data = series([0.0] * 5, gpus=0)
    data["gpu_source"] = {"available": False, "reason": "NVIDIA driver not loaded"}
    energy = energy_to_train(data, 0, 4000)
    assert energy.joules is None and "NVIDIA driver not loaded" in energy.method


def test_a_seed_across_nodes_has_the_sum_of_its_nodes_energy_each_from_its_own_series(tmp_path: Path) -> None:
    """Each node sampled itself (`node_telemetry`): the seed's energy is the sum of theirs over its window,
    the submitting host's series not counted; a node without GPU power makes it unknown, naming the node."""
    def nodes(**written: dict) -> dict:
        for name, data in written.items():
            (tmp_path / name / f"{name}.json").parent.mkdir(exist_ok=True)
            (tmp_path / name / f"{name}.json").write_text(json.dumps(data))
        return {name: node for folder in written for name, node in load_node_series(tmp_path / folder, ()).items()}

    host = series([5000.0] * 11)  # the submitting host: not the seed's
    gpu_nodes = nodes(n1=series([300.0] * 11, counter=True), n2=series([100.0] * 13, t0=-500, step_ms=900))
    energy = energy_to_train(host, 2000, 8000, gpu_nodes)
    assert energy.joules == pytest.approx((600 + 200) * 6.0)
    assert energy.method == "summed over 2 nodes: node n1: energy counter; node n2: integrated power"
    assert energy.mean_power_w == pytest.approx(800.0) and energy.peak_power_w == pytest.approx(800.0)
    assert summarize(host, 2000, 8000, gpu_nodes).energy == energy
    assert seed_energy(host, 2000, 8000, gpu_nodes).joules == pytest.approx(4800.0)
    assert energy_to_train(host, 2000, 8000).joules == pytest.approx(10000 * 6.0)  # a seed run here: the host's
    one = energy_to_train(host, 2000, 8000, {"n2": gpu_nodes["n2"]})  # one node a batch system ran
    assert one.joules == pytest.approx(200 * 6.0) and one.method == "integrated power, summed over 1 node"

    cpu_node = series([0.0] * 11, gpus=0)
    cpu_node["gpu_source"] = {"available": False, "reason": "NVML not available"}
    mixed = nodes(n1=series([300.0] * 11), n3=cpu_node)
    unknown = seed_energy(host, 2000, 8000, mixed)
    assert unknown.joules is None
    assert unknown.method == "unknown on 1 of 2 nodes: node n3: no GPU power: NVML not available"
    assert energy_to_train(host, 2000, 8000, mixed).mean_power_w is None
    silent = load_node_series(tmp_path / "n1", ("n1", "n4"))  # n4's launcher ran, its series never came
    assert seed_energy(None, 2000, 8000, silent).method == (
        "unknown on 1 of 2 nodes: node n4: the node wrote no series (its task did not end on its own)")


def test_a_seed_across_nodes_has_each_nodes_own_figures_never_the_submitting_hosts(tmp_path: Path) -> None:
    """GPU utilisation, temperature, throttling, CPU, memory and disk of a seed a batch system ran are each
    node's, from its own series, named by it; a figure a node's series lacks is unknown on that node."""
    host = series([5000.0] * 11, util=[5.0] * 11, cpu=[99.0] * 11)  # the submitting host: not the seed's
    n1 = series([300.0] * 11, util=[60.0] * 11, cpu=[40.0] * 11, throttle=[0x4] * 11)
    n1["gpus"][0]["temperature_c"] = [83.0] * 11
    n3 = series([0.0] * 11, gpus=0, cpu=[70.0] * 11)
    n3["gpu_source"] = {"available": False, "reason": "NVML not available"}
    n3["host"]["memory_used_bytes"] = [2**34] * 11
    for name, data in (("n1", n1), ("n3", n3)):
        (tmp_path / f"{name}.json").write_text(json.dumps(data))
    nodes = load_node_series(tmp_path, ("n1", "n3", "n4"))  # n4's launcher ran, its series never came
    summary = summarize(host, 2000, 8000, nodes)
    assert list(summary.systems) == ["n1", "n3", "n4"]  # the submitting host is none of them
    one, three, four = (summary.systems[n] for n in ("n1", "n3", "n4"))
    assert (one.gpu_util_mean_pct, one.temperature_peak_c, one.cpu_mean_pct) == (60.0, 83.0, 40.0)
    assert one.throttling == {"sw_power_cap": 1.0} and one.gpu_memory_peak_bytes == 2**30
    assert one.memory_peak_bytes == 2**33 and one.disk_read_mean_bytes_per_s == 1e6
    assert one.bottleneck == "none seen"
    assert three.gpu_util_mean_pct is None and three.temperature_peak_c is None and three.gpu_memory_peak_bytes is None
    assert three.cpu_mean_pct == 70.0 and three.memory_peak_bytes == 2**34 and three.bottleneck == "no GPU"
    assert four.missing == "the node wrote no series (its task did not end on its own)"
    assert four.gpu_util_mean_pct is None and four.cpu_mean_pct is None and four.throttling is None
    assert four.bottleneck == f"unknown: {four.missing}"
    assert summarize(None, 2000, 8000, nodes) == summary  # a submitting host that sampled nothing
    alone = summarize(host, 2000, 8000)  # a seed run here: the host's own
    assert list(alone.systems) == [HERE] and alone.systems[HERE].gpu_util_mean_pct == 5.0


def test_energy_rejects_a_window_that_runs_backwards() -> None:
    with pytest.raises(ValueError):
        energy_to_train(series([1.0] * 3), 2000, 1000)


def test_summary_reports_throttling_and_a_cpu_bottleneck() -> None:
    n = 10
    data = series([300.0] * n, util=[10.0] * 6 + [95.0] * 4, cpu=[97.0] * 6 + [40.0] * 4,
                  throttle=[0x4] * 2 + [0x1] * 3 + [0] * 5)
    summary = summarize(data, 0, 9000)
    assert summary.systems[HERE].throttling == {"sw_power_cap": 0.2}  # gpu_idle is not throttling
    figures = summary.systems[HERE]
    assert figures.bottleneck.startswith("CPU") and "60%" in figures.bottleneck
    assert figures.gpu_util_mean_pct == pytest.approx(44.0)
    assert summary.to_json()["energy"]["kwh"] == pytest.approx(summary.energy.joules / 3.6e6)


def test_summary_hints_at_storage_and_at_nothing() -> None:
    n = 10
    storage = summarize(series([300.0] * n, util=[5.0] * n, disk_busy=[99.0] * n), 0, 9000)
    assert storage.systems[HERE].bottleneck.startswith("dataset storage")
    assert summarize(series([300.0] * n), 0, 9000).systems[HERE].bottleneck == "none seen"


def test_a_failing_source_never_fails_the_seed(tmp_path: Path) -> None:
    class Broken(NoGpuSource):
        def sample(self) -> list:
            raise RuntimeError("driver went away")

    path = tmp_path / "telemetry.json"
    with TelemetrySampler(path, tmp_path, interval_s=0.02, gpu_source=Broken("x"),
                          host_probe=HostProbe(None, FakeCounters())):
        time.sleep(0.06)
    stored = load_series(path)
    assert stored["host"]["t_ms"] == []
    assert stored["sampling_errors"] and "driver went away" in stored["sampling_errors"][0]
