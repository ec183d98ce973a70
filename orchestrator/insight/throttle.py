"""NVML's clocks-event ("throttle") reasons: the bits of a reason bitmask as names, and which of
them mean the GPU really slowed down (power cap, thermal, hardware slowdown, power brake).

The bit values come from pynvml's own constants (`reason_bits`), never from a table here, so a
driver that renumbers them is read right; the deprecated throttle-reason names are the fallback.
"""

from __future__ import annotations

import functools
from types import ModuleType
from typing import Any

from orchestrator.insight import gpus

CLOCKS_EVENT_REASONS: dict[str, str] = {
    "GpuIdle": "gpu_idle",
    "ApplicationsClocksSetting": "applications_clocks_setting",
    "SwPowerCap": "sw_power_cap",
    "HwSlowdown": "hw_slowdown",
    "SyncBoost": "sync_boost",
    "SwThermalSlowdown": "sw_thermal_slowdown",
    "HwThermalSlowdown": "hw_thermal_slowdown",
    "HwPowerBrakeSlowdown": "hw_power_brake_slowdown",
    "DisplayClockSetting": "display_clock_setting",
}
"""NVML's clocks-event ("throttle") reasons by the suffix of pynvml's constants
(``nvmlClocksEventReason<Suffix>``; before NVML 535 renamed them, ``nvmlClocksThrottleReason<Suffix>``),
and the names stored series use for them. The bit values come from pynvml, not from here."""
REAL_THROTTLING = frozenset(
    {"sw_power_cap", "hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown"}
)


def reason_bits(nvml: ModuleType) -> dict[int, str]:
    """Bit -> reason name, from the module's own constants (the deprecated names as a fallback)."""
    table: dict[int, str] = {}
    for suffix, name in CLOCKS_EVENT_REASONS.items():
        bit = getattr(nvml, f"nvmlClocksEventReason{suffix}", None)
        if bit is None:
            bit = getattr(nvml, f"nvmlClocksThrottleReason{suffix}", None)
        if bit:
            table[int(bit)] = name
    return table


@functools.cache
def _pynvml_reason_bits() -> dict[int, str]:
    return reason_bits(gpus.load_nvml())


def throttle_reasons(bits: int, nvml: ModuleType | None = None) -> list[str]:
    """The reasons set in a clocks-event bitmask, in pynvml's bit order."""
    table = reason_bits(nvml) if nvml is not None else _pynvml_reason_bits()
    return [name for bit, name in sorted(table.items()) if bits & bit]


def clocks_event_reasons_call(nvml: ModuleType) -> Any:
    """``nvmlDeviceGetCurrentClocksEventReasons``, or the deprecated throttle-reasons call on a
    pynvml that predates it."""
    current = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
    return current or nvml.nvmlDeviceGetCurrentClocksThrottleReasons
