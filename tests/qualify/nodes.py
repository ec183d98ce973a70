"""Helpers of the qualification tests: a healthy GPU node as the NVML test double sees it, a
canned probe that prints what a GPU's probe would, and one node's qualification run in-process.
(The `mltrain_env` fixture points mltrain at tests/workloads, whose qualify.yaml times fakebench.)"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from tests.hardware.fake_nvml import TRACE, FakeNvml

HEALTHY_DEVICE = {
    "ecc_uncorrected_volatile": 0, "ecc_corrected_volatile": 0, "ecc_uncorrected_aggregate": 0,
    "retired_pages": {"sbe": 0, "dbe": 0}, "retired_pages_pending": 0, "remapped_rows": [0, 0, 0, 0],
    "power_default_limit_w": 400.0, "persistence_mode": 1, "slowdown_temperature_c": 87,
    "shutdown_temperature_c": 92, "xids": [],
}
LOADED_SAMPLE = {"util_pct": 100, "memory_used_bytes": 40 << 30, "power_w": 390, "temperature_c": 62,
                 "sm_clock_mhz": 1410, "throttle_bits": 0x4, "energy_mj": 1.0e9,
                 "pcie_current_generation": 4, "pcie_current_width": 16}
"""A GPU at its power limit under a full-power GEMM (sw_power_cap at the default limit is normal)."""


def gpu_trace(device: dict[str, Any] | None = None, sample: dict[str, Any] | None = None,
              gpu: int | None = None) -> dict[str, Any]:
    """Two healthy A100s under load; ``device``/``sample`` override fields of GPU ``gpu`` (all: None)."""
    trace = json.loads(TRACE.read_text())
    for index, entry in enumerate(trace["devices"]):
        entry.update(copy.deepcopy(HEALTHY_DEVICE))
        entry["unsupported"] = []
        if device and gpu in (None, index):
            entry.update(copy.deepcopy(device))
    loaded = []
    for index in range(len(trace["devices"])):
        one = dict(LOADED_SAMPLE)
        if sample and gpu in (None, index):
            one.update(sample)
        loaded.append(one)
    trace["samples"] = [loaded]
    return trace


def probe_source(results: dict[str, float], *, device: str = "cuda", seconds: float = 0.3,
                 extra: str = "") -> str:
    """A stand-in probe: prints a GPU probe's lines (gemm results as given) without torch."""
    lines = [{"kind": "device", "device": device, "device_name": "NVIDIA A100-SXM4-80GB", "torch": "2.13.0",
              "cuda_runtime": "12.4", "capability": "8.0", "gpu_count": 2}]
    for metric, value in results.items():
        lines.append({"kind": "result", "check": "gemm", "metric": metric, "value": value, "unit": "TFLOP/s",
                      "better": "higher", "sane": True, "detail": "canned"})
    lines.append({"kind": "timing", "check": "gemm", "seconds": seconds})
    for check in ("conv", "memory", "storage", "nccl"):
        lines.append({"kind": "timing", "check": check, "seconds": 0.0})
    body = "\n".join(f"print(':::PROBE ' + {json.dumps(json.dumps(line))})" for line in lines)
    return f"import time\ntime.sleep({seconds})\n{extra}\n{body}\n"


def run_node(results: Path, *, nvml: Any = None, probe: str | None = None, suite: str = "quick",
             references: Path | None = None, data: Path | None = None, strict: bool = False,
             node: str = "testnode", dev: Path | None = None):
    """One qualification of a node, in-process, on the local runner."""
    from orchestrator.commands.common import registry
    from orchestrator.config.locations import python_root
    from orchestrator.qualify.config import load_config
    from orchestrator.qualify.node import NodePlan, Watch, qualify_node
    from orchestrator.qualify.references import load_references
    from orchestrator.runners.local import LocalRunner

    config = load_config()
    plan = NodePlan(node=node, suite_name=suite, suite=config.suite(suite), config=config,
                    workload=registry().get(config.workload), data=data,
                    references=load_references(references) if references else None, strict=strict)
    return qualify_node(plan, LocalRunner(python_root()), results, Watch(), nvml=nvml or FakeNvml(gpu_trace()),
                        probe_source=probe, dev=dev or results / "no-dev")


__all__ = ["FakeNvml", "gpu_trace", "probe_source", "run_node"]
