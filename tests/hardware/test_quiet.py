"""Quiet-host evidence: the seed's own processes told from the host's others, what the sampler
records (steal, other processes' CPU, load, memory pressure, other GPU processes, throttling) and
the verdict each seed gets from it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from orchestrator.insight import quiet
from orchestrator.insight.gpu_source import NvmlGpuSource
from orchestrator.insight.host_probe import HostProbe
from orchestrator.insight.own_processes import OwnProcesses
from orchestrator.insight.telemetry import TelemetrySampler, load_series
from orchestrator.results.records import RunRecord
from orchestrator.runners.proc import MARK_ENV
from tests.hardware.fake_nvml import FakeNvml, busy_trace

BUSY = "import time\nend = time.time() + {s}\nwhile time.time() < end: pass\n"


# ---------------------------------------------------------------- the seed's processes


def _busy(seconds: float, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", BUSY.format(s=seconds)], env={**os.environ, **(env or {})})


def test_own_processes_are_the_tree_and_the_marked_not_the_neighbours() -> None:
    seed = _busy(1.0)
    marked = _busy(1.0, {MARK_ENV: "run-x"})  # a container's process: not below mltrain, but marked
    neighbour = _busy(1.0)
    try:
        own = OwnProcesses(mark="run-x", root=seed.pid)
        first, pids = own.step()
        time.sleep(0.6)
        used, pids = own.step()
    finally:
        for process in (seed, marked, neighbour):
            process.kill()
            process.wait()
    assert first is None  # no interval yet
    assert seed.pid in pids and marked.pid in pids and neighbour.pid not in pids
    assert used is not None and 0.05 < used < 2 * 0.6 + 0.2  # two busy processes, at most two cores' worth
    assert OwnProcesses(root=seed.pid).describe() == f"mltrain (pid {seed.pid}) and the processes below it"


def _fake_proc(root: Path, table: dict[int, tuple[int, float, float]]) -> None:
    """A /proc of ``table``: pid -> (parent, its own CPU seconds, its reaped children's)."""
    import shutil

    from orchestrator.insight.own_processes import TICKS_PER_S

    shutil.rmtree(root, ignore_errors=True)
    for pid, (parent, cpu, children) in table.items():
        (root / str(pid)).mkdir(parents=True)
        rest = [0] * 30
        rest[1], rest[11], rest[13], rest[19] = parent, round(cpu * TICKS_PER_S), round(children * TICKS_PER_S), pid
        (root / str(pid) / "stat").write_text(f"{pid} (python3 (a b)) S " + " ".join(map(str, rest[1:])))


def test_a_reaped_child_is_not_counted_twice_nor_a_new_one_lost(tmp_path: Path) -> None:
    proc = tmp_path / "proc"
    _fake_proc(proc, {100: (1, 5.0, 0.0), 101: (100, 2.0, 0.0), 200: (1, 50.0, 0.0)})
    own = OwnProcesses(root=100, proc=proc)
    assert own.step() == (None, {100, 101})
    _fake_proc(proc, {100: (1, 5.5, 3.0), 102: (100, 0.4, 0.0), 200: (1, 80.0, 0.0)})  # 101 ran 1 s more, ended
    used, pids = own.step()  # and was reaped; 102 started; 200 is someone else's
    assert pids == {100, 102}
    assert used == pytest.approx(0.5 + (3.0 - 2.0) + 0.4)


def test_proc_stat_is_read_whatever_the_command_name_holds() -> None:
    from orchestrator.insight.own_processes import TICKS_PER_S, read_stat

    ticks = TICKS_PER_S
    text = f"42 (a) b (c)) R 7 42 42 0 -1 4194560 0 0 0 0 {3 * ticks} {ticks} {2 * ticks} 0 20 0 1 0 9999 0 0"
    stat = read_stat(text)
    assert stat is not None and stat.parent == 7 and stat.cpu_s == 6.0 and stat.started == 9999
    assert read_stat("42 (a) R 7") is None


# ---------------------------------------------------------------- what the sampler records


class Counters:
    """psutil's host API with counters a test moves: CPU times in seconds, the load average."""

    def __init__(self) -> None:
        self.user, self.idle, self.steal, self.load = 1.0, 9.0, 0.0, 0.5

    def cpu_times(self) -> SimpleNamespace:
        return SimpleNamespace(user=self.user, nice=0.0, system=0.0, idle=self.idle, iowait=0.0, irq=0.0,
                               softirq=0.0, steal=self.steal)

    def virtual_memory(self) -> SimpleNamespace:
        return SimpleNamespace(total=2**34, available=2**33)

    def getloadavg(self) -> tuple[float, float, float]:
        return (self.load, 0.0, 0.0)


class FixedOwn(OwnProcesses):
    """The seed's processes used ``cpu_s`` per step (pids given)."""

    def __init__(self, cpu_s: float, pids: frozenset[int]) -> None:
        super().__init__()
        self.cpu_s, self.pids, self.steps = cpu_s, pids, 0

    def step(self) -> tuple[float | None, frozenset[int]]:
        self.steps += 1
        return (None if self.steps == 1 else self.cpu_s), self.pids


def test_sampler_records_steal_other_work_load_pressure_and_other_gpu_processes(tmp_path: Path) -> None:
    counters = Counters()
    pressure = tmp_path / "memory"
    pressure.write_text("some avg10=0.00 avg60=0.00 avg300=0.00 total=1000\nfull avg10=0 avg60=0 avg300=0 total=0\n")
    nvml = FakeNvml(busy_trace(own_pid=4242, other_pids=(777,), others_from=0))
    sampler = TelemetrySampler(tmp_path / "t.json", tmp_path, interval_s=3600, gpu_source=NvmlGpuSource(nvml),
                               host_probe=HostProbe(None, counters, pressure), own_processes=FixedOwn(1.0, {4242}))
    sampler.start()
    # 10 s of host CPU time pass: 4 s of processes (1 of them the seed's), 1 s stolen, 5 idle; 0.5 s stalled
    counters.user, counters.idle, counters.steal, counters.load = 5.0, 14.0, 1.0, 3.25
    pressure.write_text("some avg10=1.00 avg60=0.00 avg300=0.00 total=501000\n")
    sampler.stop()
    stored = load_series(tmp_path / "t.json")
    host = stored["host"]
    assert host["steal_pct"][1] == 10.0 and host["other_cpu_pct"][1] == 30.0 and host["load_1m"][1] == 3.25
    assert host["memory_pressure_pct"][1] > 0  # 0.5 s stalled over the (real, short) interval: capped at 100
    assert [g["other_processes"] for g in stored["gpus"]] == [[1, 1], [0, 0]]
    assert stored["host_cpus"] == os.cpu_count() and "own_processes" in stored["evidence_notes"]


def test_a_kernel_without_psi_says_so(tmp_path: Path) -> None:
    probe = HostProbe(None, Counters(), tmp_path / "no-pressure")
    assert probe.read().memory_stall_us is None and "a kernel without PSI" in probe.pressure_note


def test_the_real_host_gives_every_signal(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    with TelemetrySampler(path, tmp_path, interval_s=0.1):
        time.sleep(0.35)
    host = load_series(path)["host"]
    assert any(v is not None for v in host["other_cpu_pct"]) and any(v is not None for v in host["steal_pct"])
    assert all(v is not None for v in host["load_1m"])
    if Path("/proc/pressure/memory").is_file():
        assert any(v is not None for v in host["memory_pressure_pct"])


# ---------------------------------------------------------------- the verdict


def evidence_series(n: int = 20, *, other: list[float] | None = None, steal: list[float] | None = None,
                    pressure: list[float | None] | None = None, gpus: list[dict] | None = None) -> dict:
    return {
        "version": 1, "interval_s": 1.0, "gpu_source": {"available": False, "reason": "no driver"},
        "dataset_device": "vda", "host_cpus": 2,
        "host": {"t_ms": [1000 * k for k in range(n)], "cpu_pct": [50.0] * n, "iowait_pct": [0.0] * n,
                 "memory_used_bytes": [2**30] * n, "disk_read_bytes_per_s": [0.0] * n, "disk_busy_pct": [0.0] * n,
                 "steal_pct": steal or [0.0] * n, "other_cpu_pct": other or [1.0] * n, "load_1m": [1.1] * n,
                 "memory_pressure_pct": pressure or [0.0] * n},
        "gpus": gpus or [], "sampling_errors": [], "evidence_notes": {"own_processes": "mltrain (pid 1)"},
    }


def test_a_quiet_host_is_quiet_and_says_what_was_measured() -> None:
    verdict = quiet.judge(evidence_series(), 0, 19000)
    assert verdict.verdict == "quiet" and not verdict.causes and verdict.samples == 20
    assert verdict.reason.startswith("quiet: other processes 1% of the host's CPU, steal 0%")
    assert verdict.measured["load_1m"] == 1.1


def test_other_work_through_most_of_the_seed_disturbs_it_and_names_its_share() -> None:
    other = [2.0] * 4 + [48.0] * 16  # a neighbour from the 5th second on
    verdict = quiet.judge(evidence_series(other=other), 0, 19000)
    assert verdict.verdict == "disturbed" and [c.cause for c in verdict.causes] == ["other_processes"]
    assert verdict.causes[0].share == 0.8
    assert "the host ran other work in 80% of the seed's time (other processes used 39% of its CPU" in verdict.reason


def test_a_few_busy_seconds_do_not_disturb_a_seed() -> None:
    verdict = quiet.judge(evidence_series(other=[1.0] * 19 + [90.0]), 0, 19000)  # 5% of the samples
    assert verdict.verdict == "quiet"


def test_steal_and_memory_pressure_are_causes_of_their_own() -> None:
    verdict = quiet.judge(evidence_series(steal=[12.0] * 20, pressure=[0.0] * 10 + [20.0] * 10), 0, 19000)
    assert [c.cause for c in verdict.causes] == ["cpu_steal", "memory_pressure"]
    assert "steal of 5% or more) in 100% of the seed's time (12% on average)" in verdict.reason
    assert "tasks stalled on memory in 50% of the seed's time" in verdict.reason


def test_only_the_window_between_run_start_and_run_stop_is_judged() -> None:
    other = [90.0] * 5 + [1.0] * 15  # busy before run_start (data loading, another seed's teardown)
    assert quiet.judge(evidence_series(other=other), 5000, 19000).verdict == "quiet"


def _gpu_columns(trace: dict, own: int) -> list[dict]:
    """The GPU columns the sampler writes from a trace (other processes: those that are not ``own``)."""
    steps = trace["samples"]
    return [{"throttle_bits": [s[g]["throttle_bits"] for s in steps],
             "other_processes": [sum(1 for p in s[g]["processes"] if p["pid"] != own) for s in steps]}
            for g in range(len(steps[0]))]


def test_another_process_on_the_runs_gpus_disturbs_the_seed() -> None:
    gpus = _gpu_columns(busy_trace(own_pid=10, steps=20, other_pids=(11, 12), others_from=10), own=10)
    verdict = quiet.judge(evidence_series(gpus=gpus), 0, 19000)
    assert [c.cause for c in verdict.causes] == ["gpu_processes"]
    assert "another process ran on the run's GPUs in 50% of the seed's time (up to 2 at once)" in verdict.reason


def test_thermal_throttling_disturbs_a_seed_and_holding_the_power_cap_does_not() -> None:
    hot = _gpu_columns(busy_trace(own_pid=10, steps=20, reasons=("HwThermalSlowdown",), reasons_from=15), own=10)
    verdict = quiet.judge(evidence_series(gpus=hot), 0, 19000)
    assert verdict.verdict == "disturbed" and verdict.causes[0].cause == "gpu_throttle"
    assert "(hw_thermal_slowdown) in 25% of the seed's time" in verdict.reason
    capped = _gpu_columns(busy_trace(own_pid=10, steps=20, reasons=("SwPowerCap", "GpuIdle")), own=10)
    verdict = quiet.judge(evidence_series(gpus=capped), 0, 19000)
    assert verdict.verdict == "quiet" and verdict.measured["throttle_sw_power_cap"] == 1.0
    assert "throttle_gpu_idle" not in verdict.measured


def test_what_cannot_be_judged_says_why() -> None:
    assert quiet.judge(None, 0, 1000).reason == "not judged: no telemetry was sampled"
    old = evidence_series()
    for name in ("steal_pct", "other_cpu_pct", "load_1m", "memory_pressure_pct"):
        del old["host"][name]
    assert "predates the quiet-host evidence" in quiet.judge(old, 0, 19000).reason
    assert quiet.judge(evidence_series(), 0, 1500).verdict == "unknown"  # two samples
    no_psi = evidence_series(pressure=[None] * 20)
    no_psi["evidence_notes"]["memory_pressure"] = "/proc/pressure/memory: No such file (a kernel without PSI)"
    verdict = quiet.judge(no_psi, 0, 19000)
    assert verdict.verdict == "quiet" and "a kernel without PSI" in verdict.not_measured["memory_pressure_pct"]


def test_the_verdict_is_kept_in_the_seed_record_and_old_records_still_load() -> None:
    verdict = quiet.judge(evidence_series(other=[50.0] * 20), 0, 19000)
    record = RunRecord(status="converged", reason="reached", time_to_train_ms=10, quiet_host=verdict)
    again = RunRecord.from_json(json.loads(json.dumps(record.to_json())))
    assert again.quiet_host == verdict and again.quiet_host.causes[0].share == 1.0
    assert RunRecord.from_json({"status": "converged", "reason": "reached", "time_to_train_ms": 10}).quiet_host is None


def test_a_gpu_cause_is_judged_where_the_hosts_cpu_could_not_be_told_apart() -> None:
    gpus = _gpu_columns(busy_trace(own_pid=10, steps=20, other_pids=(11,)), own=10)
    blind = evidence_series(gpus=gpus, other=[None] * 20, steal=[None] * 20)
    verdict = quiet.judge(blind, 0, 19000)
    assert verdict.verdict == "disturbed" and verdict.causes[0].cause == "gpu_processes"
    verdict = quiet.judge(evidence_series(other=[None] * 20, steal=[None] * 20), 0, 19000)
    assert verdict.verdict == "unknown" and "could not be told apart" in verdict.reason
