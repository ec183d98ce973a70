"""The host side of a seed's telemetry: CPU busy, iowait and steal, memory used, the load average,
memory pressure (the kernel's pressure stall information, where it has it), and the read rate and
busy time of the block device holding the dataset, read through psutil and /proc (`HostProbe`),
and which device that is (`dataset_disk`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from orchestrator.insight import sysinfo


@dataclass(frozen=True, kw_only=True)
class HostSample:
    """Host counters at one instant (cumulative where the kernel counts)."""

    cpu_busy_s: float
    """user+nice+system+irq+softirq+steal, all CPUs."""
    cpu_iowait_s: float
    """Time waiting for I/O."""
    cpu_total_s: float
    """All time."""
    memory_used_bytes: int | None
    """Total minus available memory."""
    disk_read_bytes: int | None
    """Bytes read from the dataset device."""
    disk_busy_ms: int | None
    """Milliseconds the dataset device was busy."""
    cpu_process_s: float = 0.0
    """user+nice+system, all CPUs: the time processes ran (what their own CPU times add up to)."""
    cpu_steal_s: float = 0.0
    """Time the hypervisor gave this VM's CPUs to others (0 on bare metal)."""
    load_1m: float | None = None
    """The 1-minute load average (runnable and uninterruptible tasks, host-wide)."""
    memory_stall_us: int | None = None
    """Microseconds in which some task stalled on memory (PSI ``some total``); None without PSI."""


PRESSURE_MEMORY = Path("/proc/pressure/memory")
"""The kernel's memory pressure stall information (Linux 4.20+, CONFIG_PSI)."""


class HostProbe:
    """Reads CPU times, memory and the dataset device's counters through psutil (or a module
    with its API, in tests)."""

    def __init__(self, disk: str | None, counters: Any = psutil, pressure: Path = PRESSURE_MEMORY) -> None:
        self.disk = disk
        self.counters = counters
        self.pressure = pressure
        self.pressure_note = ""
        """Why there is no memory pressure ('' while it is read)."""

    def read(self) -> HostSample:
        cpu = self.counters.cpu_times()
        busy = cpu.user + cpu.nice + cpu.system + sum(getattr(cpu, f, 0.0) for f in ("irq", "softirq", "steal"))
        iowait = getattr(cpu, "iowait", 0.0)
        memory = self.counters.virtual_memory()
        read_bytes, busy_ms = self._disk()
        load = getattr(self.counters, "getloadavg", None)
        return HostSample(
            cpu_busy_s=busy,
            cpu_iowait_s=iowait,
            cpu_total_s=busy + cpu.idle + iowait,
            memory_used_bytes=int(memory.total - memory.available),
            disk_read_bytes=read_bytes,
            disk_busy_ms=busy_ms,
            cpu_process_s=cpu.user + cpu.nice + cpu.system,
            cpu_steal_s=getattr(cpu, "steal", 0.0),
            load_1m=float(load()[0]) if load is not None else None,
            memory_stall_us=self._memory_stall_us(),
        )

    def _memory_stall_us(self) -> int | None:
        """PSI's ``some total=`` of memory, or None (and why, in `pressure_note`)."""
        try:
            text = self.pressure.read_text()
        except OSError as exc:
            self.pressure_note = f"{self.pressure}: {exc.strerror or exc} (a kernel without PSI)"
            return None
        for line in text.splitlines():
            if line.startswith("some "):
                fields = dict(part.split("=", 1) for part in line.split()[1:] if "=" in part)
                if fields.get("total", "").isdigit():
                    return int(fields["total"])
        self.pressure_note = f"{self.pressure}: no 'some total=' line"
        return None

    def _disk(self) -> tuple[int | None, int | None]:
        if self.disk is None:
            return None, None
        device = (self.counters.disk_io_counters(perdisk=True) or {}).get(self.disk)
        if device is None:
            return None, None
        return int(device.read_bytes), getattr(device, "busy_time", None)


def dataset_disk(data_dir: Path) -> tuple[str | None, str]:
    """The block device holding ``data_dir`` (for /proc/diskstats), or None and why not."""
    try:
        mount = sysinfo.mount_of(data_dir, sysinfo.mounts())
    except OSError as exc:
        return None, f"cannot read the mount table: {exc.strerror}"
    if mount is None:
        return None, f"no mount holds {data_dir}"
    if mount.fstype in sysinfo.NETWORK_FILESYSTEMS:
        return None, f"{mount.fstype} is a network filesystem: no local device to watch"
    device = sysinfo.block_device(mount.device_number)
    if device is None:
        return None, f"{mount.fstype} at {mount.mount_point}: backing block device not visible here"
    return device, ""
