"""GPU health, read on the node itself through NVML: before the load, sampled while the probe and
the workload run, and after. Its verdicts are sanity (pass/fail), never performance.

    monitor = HealthMonitor(policy)            # reads ECC, retired pages, remapped rows, limits ...
    with monitor.under_load():                 # samples throttle reasons, PCIe link, temperature
        ... run the load ...
    check = monitor.result(cuda_findings)      # a CheckResult, every reason naming the GPU

Its scope is the node: every GPU NVML sees, whichever of them the checks ran on (the run's GPUs are
the probe's; `orchestrator.qualify.devices` holds the two views side by side). A GPU NVML counts but
cannot read (fallen off the bus, outside the job's device cgroup) fails, named. On a host without
GPUs the check is not applicable (never passed); a host whose /dev/nvidia* devices exist but whose
driver does not answer fails.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from orchestrator.insight.gpus import NvmlSession, NvmlUnavailable, XidWatch
from orchestrator.insight.throttle import throttle_reasons
from orchestrator.insight.unavailable import is_unavailable
from orchestrator.qualify.config import HealthPolicy
from orchestrator.qualify.devices import Finding, Gpu, nvml_gpus
from orchestrator.results.qualification import CheckResult, Measurement, Remediation, Remedy, Status, worst

HARDWARE_SLOWDOWN = ("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown")
"""Clock-event reasons that are faults under load: the board, its cooling or its power supply."""


def gpu_device_files(dev: Path = Path("/dev")) -> list[str]:
    return sorted(p.name for p in dev.glob("nvidia[0-9]*"))


class HealthMonitor:
    """One node's GPU health across a qualification."""

    def __init__(self, policy: HealthPolicy, nvml: ModuleType | None = None, dev: Path = Path("/dev"), *,
                 unanswered: str = "") -> None:
        """Reads every GPU through NVML (``nvml``: a stand-in module; None: pynvml). ``unanswered``: why
        NVML is not asked at all (it hung the last time: `opened`)."""
        self.policy = policy
        self.started = time.monotonic()
        self.samples: list[list[dict[str, Any]]] = []
        self.session: NvmlSession | None = None
        self.reason = unanswered
        self.unanswered = unanswered
        try:
            self.session = None if unanswered else NvmlSession(nvml)
        except NvmlUnavailable as exc:
            self.reason = str(exc)
        self.device_files = gpu_device_files(dev)
        self.before: list[dict[str, Any]] = []
        self.system: dict[str, Any] = {}
        self.xids: XidWatch | None = None
        if self.session is not None:
            self.system = self.session.system()
            self.before = [self.session.device_health(i) for i in range(len(self.session.handles))]
            self.xids = XidWatch(self.session)
        self.read_seconds = time.monotonic() - self.started

    @property
    def gpu_count(self) -> int:
        return len(self.session.handles) if self.session else 0

    @property
    def gpus(self) -> list[Gpu]:
        """Every GPU NVML sees, as read before the load (unreadable ones included)."""
        return nvml_gpus(self.before)

    @property
    def gpu_model(self) -> str | None:
        """The model of the node's GPUs (a node of mixed models: each, joined in NVML's order)."""
        names = list(dict.fromkeys(g.name for g in self.gpus if g.name))
        return " + ".join(names) if names else None

    @contextlib.contextmanager
    def under_load(self) -> Iterator[None]:
        """Sample every GPU each `sample_interval_s` while the body runs."""
        if self.session is None or not self.gpu_count:
            yield
            return
        stop = threading.Event()
        session = self.session

        def loop() -> None:
            while True:
                self.samples.append([session.load_sample(i) for i in range(len(session.handles))])
                if stop.wait(self.policy.sample_interval_s):
                    return

        thread = threading.Thread(target=loop, name="qualify-health-sampler", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join(timeout=10)

    def close(self) -> None:
        if self.xids is not None:
            self.xids.close()
        if self.session is not None:
            self.session.close()

    # ------------------------------------------------------------ the verdict

    def result(self, more: list[Finding] | None = None) -> CheckResult:
        """The verdict, with ``more`` findings (what the probe's CUDA saw of these GPUs); its duration is
        the time spent reading NVML (the load is the other checks')."""
        started = time.monotonic()
        if self.unanswered:
            return CheckResult(name="gpu_health", kind="health", status=Status.INCONCLUSIVE,
                               sanity=Status.INCONCLUSIVE, reasons=(self.unanswered,),
                               sanity_reasons=(self.unanswered,), duration_s=self.read_seconds)
        if self.session is None or not self.gpu_count:
            why = self.reason or "NVML reports no GPU"
            if self.device_files:
                return CheckResult(
                    name="gpu_health", kind="health", status=Status.FAIL, sanity=Status.FAIL,
                    reasons=(f"GPU device files exist ({', '.join(self.device_files)}) but NVML cannot read them:"
                             f" {why}",),
                    remediation=(Remediation(action=Remedy.DRAIN_REBOOT, check="gpu_health"),),
                    duration_s=self.read_seconds + time.monotonic() - started)
            reason = f"no GPU on this host ({why})"
            return CheckResult(name="gpu_health", kind="health", status=Status.NOT_APPLICABLE,
                               sanity=Status.NOT_APPLICABLE, reasons=(reason,), sanity_reasons=(reason,),
                               duration_s=self.read_seconds + time.monotonic() - started)
        after = [self.session.device_health(i) for i in range(self.gpu_count)]
        xids = self.xids.drain() if self.xids else []
        gpus = nvml_gpus(self.before)
        findings: list[Finding] = list(more or [])
        measurements: list[Measurement] = []
        for index, (before, now) in enumerate(zip(self.before, after, strict=True)):
            samples = [step[index] for step in self.samples if index < len(step)]
            findings += [f._replace(gpu=gpus[index].index)
                         for f in judge_device(gpus[index].label, before, now, samples, self.policy)]
            peak = max((s["temperature_c"] for s in samples if s.get("temperature_c") is not None), default=None)
            if peak is not None:
                measurements.append(Measurement(metric=f"gpu{index}_temperature_max_C", value=float(peak), unit="C",
                                                better="lower", detail="hottest reading under load",
                                                device=gpus[index].label))
        named = {g.index: g.label for g in gpus}
        findings += [Finding(Status.FAIL, f"{named.get(i, f'GPU{i}')}: Xid {xid} during the qualification: check"
                                          " `dmesg` / nvidia-smi -q", Remedy.DRAIN_REBOOT, i) for i, xid in xids]
        findings.sort(key=lambda f: -f.status.rank)
        status = worst([f.status for f in findings])
        reasons = tuple(f.text for f in findings if f.status is not Status.PASS)
        notes = tuple(f.text for f in findings if f.status is Status.PASS)
        remediation = tuple(Remediation(action=f.remedy, check="gpu_health", gpu=f.gpu) for f in findings
                            if f.status is Status.FAIL and f.remedy is not None)
        facts = {"scope": f"every GPU NVML sees on this node ({len(gpus)}), not only those the checks ran on",
                 "gpus": [g.label for g in gpus], "driver": self.system, "devices": after,
                 "load_samples": len(self.samples), "notes": list(notes),
                 "xid": self.xids.reason if self.xids and self.xids.reason else "watched"}
        return CheckResult(name="gpu_health", kind="health", status=status, sanity=status, reasons=reasons,
                           sanity_reasons=reasons, measurements=tuple(measurements), facts=facts,
                           remediation=remediation, duration_s=self.read_seconds + time.monotonic() - started)


def _num(value: Any) -> float | None:
    return None if value is None or is_unavailable(value) or isinstance(value, bool) else float(value)


def judge_device(
    gpu: str, before: dict[str, Any], now: dict[str, Any], samples: list[dict[str, Any]], policy: HealthPolicy,
) -> list[Finding]:
    """Every finding about one GPU (``gpu``: how reasons name it): (FAIL/WARN, reason) for faults,
    (PASS, note) for what is fine but worth knowing. A GPU NVML cannot read fails, with NVML's reason."""
    for reading in (before, now):
        if is_unavailable(reading):
            return [Finding(Status.FAIL, f"{gpu}: cannot be read through NVML: {reading['reason']}",
                            Remedy.DRAIN_REBOOT)]
    found: list[Finding] = []
    mig = now.get("mig")
    if isinstance(mig, dict) and mig.get("enabled") is True:
        found.append(Finding(Status.WARN, f"{gpu}: MIG mode is on: CUDA sees its instances, not the whole GPU, so"
                                          " the checks measure one instance (`nvidia-smi -i <index> -mig 0` to qualify"
                                          " the GPU)"))
    if now.get("retired_pages_pending") is True:
        found.append(Finding(Status.FAIL, f"{gpu}: retired pages pending (retirement waits for a GPU reset):"
                                          " drain the node and reset the GPU", Remedy.RESET_GPU))
    remapped = now.get("remapped_rows")
    if isinstance(remapped, dict) and not is_unavailable(remapped):
        if remapped.get("failed"):
            found.append(Finding(Status.FAIL, f"{gpu}: row remapping failed: the GPU needs service", Remedy.REPLACE))
        if remapped.get("pending"):
            found.append(Finding(Status.FAIL, f"{gpu}: row remapping pending: reset the GPU", Remedy.RESET_GPU))
    found += _ecc(gpu, before, now)
    found += _load(gpu, now, samples, policy)
    power, default = _num(now.get("power_limit_w")), _num(now.get("power_default_limit_w"))
    if power is not None and default is not None and power < default - 0.5:
        found.append(Finding(Status.WARN, f"{gpu}: power limit {power:.0f} W below its default {default:.0f} W"))
    if now.get("persistence_mode") is False:
        found.append(Finding(Status.WARN, f"{gpu}: persistence mode off (the driver reloads between jobs):"
                                          " `nvidia-smi -pm 1` or nvidia-persistenced"))
    return found


def _ecc(gpu: str, before: dict[str, Any], now: dict[str, Any]) -> list[Finding]:
    found: list[Finding] = []
    mode = now.get("ecc_mode")
    if isinstance(mode, dict) and not is_unavailable(mode):
        if not mode.get("enabled"):
            found.append(Finding(Status.WARN, f"{gpu}: ECC is disabled"))
        elif mode.get("pending") is False:
            found.append(Finding(Status.WARN, f"{gpu}: ECC is switched off at the next reboot"))
    start, end = _num(before.get("ecc_uncorrected_volatile")), _num(now.get("ecc_uncorrected_volatile"))
    if start is not None and end is not None and end > start:
        found.append(Finding(Status.FAIL, f"{gpu}: uncorrectable ECC errors rose from {start:.0f} to {end:.0f} during"
                                          " the qualification", Remedy.RESET_GPU))
    elif end:
        found.append(Finding(Status.FAIL, f"{gpu}: {end:.0f} uncorrectable ECC errors since the driver loaded",
                             Remedy.RESET_GPU))
    start, end = _num(before.get("ecc_corrected_volatile")), _num(now.get("ecc_corrected_volatile"))
    if start is not None and end is not None and end > start:
        found.append(Finding(Status.WARN, f"{gpu}: correctable ECC errors rose from {start:.0f} to {end:.0f} during the"
                                          " qualification"))
    dbe = _num(now.get("retired_pages_dbe"))
    if dbe:
        found.append(Finding(Status.PASS, f"{gpu}: {dbe:.0f} pages retired for double-bit errors"))
    return found


def _load(
    gpu: str, now: dict[str, Any], samples: list[dict[str, Any]], policy: HealthPolicy,
) -> list[Finding]:
    found: list[Finding] = []
    if not samples:
        return [Finding(Status.PASS, f"{gpu}: no reading under load (the load did not run)")]
    seen: dict[str, int] = {}
    for sample in samples:
        for reason in throttle_reasons(sample.get("throttle_bits") or 0):
            seen[reason] = seen.get(reason, 0) + 1
    share = {reason: count / len(samples) for reason, count in seen.items()}
    for reason in HARDWARE_SLOWDOWN:
        if reason in share:
            found.append(Finding(Status.FAIL, f"{gpu}: {reason} under load in {share[reason]:.0%} of readings",
                                 Remedy.CHECK_POWER if reason == "hw_power_brake_slowdown" else Remedy.CHECK_COOLING))
    if "sw_thermal_slowdown" in share:
        found.append(Finding(Status.WARN, f"{gpu}: sw_thermal_slowdown under load in {share['sw_thermal_slowdown']:.0%}"
                                          " of readings: check cooling and airflow"))
    if "sw_power_cap" in share:
        power, default = _num(now.get("power_limit_w")), _num(now.get("power_default_limit_w"))
        if power is not None and default is not None and power < default - 0.5:
            found.append(Finding(Status.WARN, f"{gpu}: sw_power_cap under load in {share['sw_power_cap']:.0%} of"
                                              f" readings at a {power:.0f} W limit, below its default {default:.0f} W"))
        else:
            found.append(Finding(Status.PASS, f"{gpu}: at its power limit under load ({share['sw_power_cap']:.0%} of"
                                              " readings; usual for a full-power GEMM)"))
    widths = [s["pcie_width"] for s in samples if s.get("pcie_width") is not None]
    gens = [s["pcie_generation"] for s in samples if s.get("pcie_generation") is not None]
    max_width, max_gen = _num(now.get("pcie_max_width")), _num(now.get("pcie_max_generation"))
    if widths and max_width and max(widths) < max_width:
        found.append(Finding(Status.FAIL, f"{gpu}: PCIe link x{max(widths)} of x{max_width:.0f} under load:"
                                          " reseat the card or check the riser", Remedy.RESEAT))
    if gens and max_gen and max(gens) < max_gen:
        found.append(Finding(Status.WARN, f"{gpu}: PCIe gen {max(gens)} of {max_gen:.0f} under load"))
    peak = max((s["temperature_c"] for s in samples if s.get("temperature_c") is not None), default=None)
    slowdown = _num(now.get("slowdown_temperature_c"))
    if peak is not None and slowdown is not None:
        if peak >= slowdown:
            found.append(Finding(Status.FAIL, f"{gpu}: reached {peak} C under load, its slowdown temperature is"
                                              f" {slowdown:.0f} C", Remedy.CHECK_COOLING))
        elif peak >= slowdown - policy.temperature_margin_c:
            found.append(Finding(Status.WARN, f"{gpu}: {peak} C under load, within {policy.temperature_margin_c:g} C of"
                                              f" its slowdown temperature {slowdown:.0f} C"))
    return found
