"""Helpers of the qualification tests: a healthy GPU node as the NVML test double sees it, a
canned probe that prints what a GPU's probe would, and one node's qualification run in-process.
(The `mltrain_env` fixture points mltrain at tests/workloads, whose qualify.yaml times fakebench.)"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from tests.hardware.fake_nvml import TRACE, FakeNvml, cuda_order, node_trace, pci_bus_id

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


STAND_IN_HEAD = """import json, os, time
from workloads.common.probe import protocol

def emit_result(check, metric, value, unit, **more):
    protocol.result(check, metric, protocol.Outcome(
        sanity=protocol.Sanity(passed=True, detail="stand-in"),
        performance=protocol.Performance(value=value, unit=unit, detail="stand-in")), **more)

ORDER = json.loads(os.environ.get("MLTRAIN_PROBE_CONFIG", "{}")).get("order", [])  # each done at its timing line
"""
"""What the stand-in probes share: the probe's own line writer (workloads/common/probe/protocol.py,
importable where the local runner runs them), so that they speak the protocol the orchestrator reads,
and the order of checks it was given."""


def probe_source(results: dict[str, float], *, device: str = "cuda", seconds: float = 0.3,
                 extra: str = "") -> str:
    """The text of a stand-in probe script: prints a GPU probe's lines (gemm results as given) without torch."""
    facts = {"device": device, "device_name": "NVIDIA A100-SXM4-80GB", "torch": "2.13.0", "cuda_runtime": "12.4",
             "capability": "8.0", "gpu_count": 2}
    body = [f"protocol.device(json.loads({json.dumps(json.dumps(facts))}))"]
    body += [f"emit_result('gemm', {metric!r}, {value!r}, 'TFLOP/s')" for metric, value in results.items()]
    body += [f"for check in ORDER:\n    protocol.timing(check, {seconds} if check == 'gemm' else 0.0)"]
    return STAND_IN_HEAD + f"time.sleep({seconds})\n{extra}\n" + "\n".join(body) + "\n"


def stand_in_config(folder: Path, source: str, base: Path | None = None) -> Path:
    """A qualify.yaml: ``base`` (else the test workloads', tests/workloads/qualify.yaml) whose probe
    command runs the stand-in probe script ``source``, written beside it. Point MLTRAIN_QUALIFY_FILE at it."""
    from tests.conftest import TEST_WORKLOADS

    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "stand_in_probe.py"
    script.write_text(source)
    config = folder / "qualify.yaml"
    config.write_text((base or TEST_WORKLOADS / "qualify.yaml").read_text()
                      + f"probe: {{command: [python, {json.dumps(str(script))}]}}\n")
    return config


H100 = "NVIDIA H100 80GB HBM3"


def cuda_probe_source(trace: dict[str, Any], results: dict[str, float] | None = None, *,
                      per_gpu: dict[int, dict[str, float]] | None = None, usable: list[int] | None = None,
                      error: str = "CUDA driver version is insufficient for CUDA runtime version",
                      seconds: float = 0.3) -> str:
    """The text of a stand-in probe script that sees the fake node as CUDA would: the GPUs of ``trace`` CUDA can use
    (``usable``, NVML indices; default all), numbered in CUDA's order (PCI bus order only under
    ``CUDA_DEVICE_ORDER=PCI_BUS_ID``, else fastest first), narrowed by ``CUDA_VISIBLE_DEVICES``; none
    left: a CPU probe that says why (``error``). ``results`` are the cases of cuda:0 (or the CPU);
    ``per_gpu`` the per-GPU cases by NVML index, printed as the real probe prints them (``_gpu<i>``,
    i CUDA's index, on a node of two or more GPUs)."""
    devices = trace["devices"]
    node = {
        "gpus": [{"name": d["name"], "uuid": d["uuid"].removeprefix("GPU-"), "pci_bus_id": pci_bus_id(d, i)}
                 for i, d in enumerate(devices)],
        "pci": cuda_order(trace, "PCI_BUS_ID"), "fastest": cuda_order(trace, None),
        "usable": list(range(len(devices))) if usable is None else usable, "error": error,
        "results": results or {}, "per_gpu": {str(k): v for k, v in (per_gpu or {}).items()},
    }
    return STAND_IN_HEAD + f"""NODE = json.loads({json.dumps(json.dumps(node))})
time.sleep({seconds})
order = NODE["pci"] if os.environ.get("CUDA_DEVICE_ORDER") == "PCI_BUS_ID" else NODE["fastest"]
order = [i for i in order if i in NODE["usable"]]
visible = os.environ.get("CUDA_VISIBLE_DEVICES")
if visible is not None:
    picked = []
    for part in [p.strip() for p in visible.split(",") if p.strip()]:
        if part.isdigit():
            if int(part) >= len(order):
                break
            picked.append(order[int(part)])
        else:
            picked += [i for i in order if NODE["gpus"][i]["uuid"] == part.removeprefix("GPU-")]
    order = picked

def result(metric, value, **more):
    if metric.startswith(("gemm", "spmm")):
        emit_result("gemm", metric, value, "TFLOP/s", **more)
    elif metric.startswith(("h2d_GBps", "d2h_GBps", "d2d_min_GBps")):
        emit_result("bandwidth", metric, value, "GB/s", **more)
    else:
        emit_result("memory", metric, value, "GB/s", **more)

if order:
    protocol.device(dict(device="cuda", device_name=NODE["gpus"][order[0]]["name"], torch="2.13.0",
                         cuda_runtime="12.4", capability="9.0", gpu_count=len(order),
                         gpus=[dict(index=c, **NODE["gpus"][i]) for c, i in enumerate(order)]))
else:
    protocol.device(dict(device="cpu", device_name="Stand-in CPU", torch="2.13.0", cuda_runtime="12.4",
                         capability=None, gpu_count=0, cuda_unavailable=NODE["error"]))
for metric, value in NODE["results"].items():
    result(metric, value)
for c, i in enumerate(order):
    for metric, value in NODE["per_gpu"].get(str(i), {{}}).items():
        if len(order) > 1:
            result(metric + "_gpu" + str(c), value, gpu=c)
        else:
            result(metric, value)
for check in ORDER:
    protocol.timing(check, 0.0)
"""


def run_node(results: Path, *, nvml: Any = None, probe: str | None = None, suite: str = "quick",
             references: Path | None = None, data: Path | None = None, strict: bool = False,
             node: str = "testnode", dev: Path | None = None, gpus: str | None = None,
             config: Path | None = None, checks: Any = None, expect_gpus: int | None = None):
    """One qualification of a node, in-process, on the local runner; ``probe``: the text of a stand-in
    probe script run in the real probe's place (None: the real probe); ``config``: a qualify.yaml (else
    the test workloads'); ``checks``: the registry (else mltrain's); ``expect_gpus``: --expect-gpus."""
    from orchestrator.commands.common import registry
    from orchestrator.config.locations import python_root
    from orchestrator.qualify.catalog import default_registry
    from orchestrator.qualify.config import load_config
    from orchestrator.qualify.expected import Expected
    from orchestrator.qualify.node import NodePlan, Watch, qualify_node
    from orchestrator.qualify.references import load_references
    from orchestrator.runners.local import LocalRunner

    checks = checks or default_registry()
    if probe is not None:
        config = stand_in_config(results.parent / "stand-in-probe", probe, config)
    loaded = load_config(config, checks)
    plan = NodePlan(node=node, suite_name=suite, suite=loaded.suite(suite), config=loaded,
                    workload=registry().get(loaded.workload), data=data,
                    references=load_references(references) if references else None, strict=strict, gpus=gpus,
                    checks=checks, expect_gpus=Expected(count=expect_gpus, source=f"--expect-gpus {expect_gpus}")
                    if expect_gpus is not None else Expected())
    return qualify_node(plan, LocalRunner(python_root(), gpus=gpus), results, Watch(),
                        nvml=nvml or FakeNvml(gpu_trace()), dev=dev or results / "no-dev")


def suite_of(**given: Any) -> Any:
    """A suite of qualify.yaml (`config.Suite`) from its keys, its checks' settings typed by mltrain's registry."""
    from orchestrator.qualify.catalog import default_registry
    from orchestrator.qualify.config import Suite

    return Suite.model_validate(given, context={"checks": default_registry()})


def probe_of(**given: Any) -> Any:
    """qualify.yaml's ``probe:`` (`config.ProbeSettings`), its default checks mltrain's registry's."""
    from orchestrator.qualify.catalog import default_registry
    from orchestrator.qualify.config import ProbeSettings

    return ProbeSettings.model_validate(given, context={"checks": default_registry()})


__all__ = ["H100", "FakeNvml", "cuda_probe_source", "gpu_trace", "node_trace", "probe_of", "probe_source",
           "run_node", "stand_in_config", "suite_of"]
