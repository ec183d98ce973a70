"""An imported run carries only the facts its logs and its system description give: the compared
systems' own accelerator, CPU, framework and software, never the software of the host that imported
them; what neither states is unknown, and an unknown is never 'the same'."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from .published_layout import Run, unet3d_log, write_benchmark

EOS = {
    "submitter": "NVIDIA", "division": "closed", "status": "onprem", "system_name": "Eos",
    "number_of_nodes": "1", "host_processors_per_node": "2",
    "host_processor_model_name": "Intel(R) Xeon(R) Platinum 8480C", "host_processor_core_count": "56",
    "host_processor_vcpu_count": "", "host_processor_frequency": "", "host_processor_caches": "",
    "host_processor_interconnect": "", "host_memory_capacity": "2.0 TB", "host_storage_type": "NVMe SSD",
    "host_storage_capacity": "2x 1.92TB NVMe SSD + 8x 3.84TB NVMe U.2",
    "host_networking": "Storage: 2x ConnectX-7 IB NDR 400Gb/s, Compute: 8x ConnectX-7 IB NDR 400Gb/s",
    "host_networking_topology": "", "host_memory_configuration": "", "accelerators_per_node": "8",
    "accelerator_model_name": "NVIDIA H100-SXM5-80GB", "accelerator_host_interconnect": "",
    "accelerator_frequency": "", "accelerator_on-chip_memories": "", "accelerator_memory_configuration": "HBM3",
    "accelerator_memory_capacity": "81559 MiB", "accelerator_interconnect": "NVLINK Gen4 900 GB/s + NVSWITCH Gen3",
    "accelerator_interconnect_topology": "", "cooling": "", "hw_notes": "",
    "framework": "MxNet NVIDIA Release 24.04", "framework_name": "ngc24.04_mxnet",
    "other_software_stack": {
        "cuda_version": "12.4.1.003", "cuda_driver_version": "550.54.15", "nccl_version": "2.21.5",
        "cublas_version": "12.4.5.8", "cudnn_version": "9.1.0.70", "dali_version": "1.36.0",
        "openmpi_version": "4.1.7", "kernel_version": "Linux 5.15.0-88-generic", "nvidia_kernel_driver": "535.129.03",
    },
    "operating_system": "Ubuntu 22.04.4 LTS", "sw_notes": "",
}
"""NVIDIA's v4.0 systems/eos_ngc24.04_mxnet.json (training_results_v4.0), its fields as published."""
H200 = copy.deepcopy(EOS) | {"system_name": "NVIDIA H200 (8x H200-SXM-141GB)",
                             "accelerator_model_name": "NVIDIA H200-SXM5-141GB",
                             "accelerator_memory_configuration": "HBM3e", "accelerator_memory_capacity": "143771 MiB",
                             "host_storage_capacity": "2x 1.75TB NVMe SSD + 8x3.5TB NVMe"}
H200["other_software_stack"] = {**EOS["other_software_stack"], "kernel_version": "Linux 5.15.0-1044-nvidia",
                                "nvidia_kernel_driver": "550.54.09"}
"""NVIDIA's v4.0 systems/h200_ngc24.04_mxnet.json: the same software but its driver and kernel."""


def _said(out: str) -> str:
    """What was printed, as one line (prose wraps at the terminal's width)."""
    return " ".join(out.split())


def _submission(root: Path, system: str, description: dict | None, epoch_ms: int) -> Path:
    logs = {f"result_{i}.txt": unet3d_log(Run(epochs=1800 + 100 * (i % 5), epoch_ms=epoch_ms + i % 3, seed=i))
            for i in range(40)}
    write_benchmark(root, system, "unet3d", logs, description=description)
    if description is None:
        (root / "systems" / f"{system}.json").unlink()
    return root


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """NVIDIA's v4.0 H100 (Eos) and H200 unet3d submissions imported as h100 and h200, and a folder of
    logs without a system description as bare."""
    import os

    from orchestrator.cli import main

    root = tmp_path_factory.mktemp("imports")
    results = root / "results"
    os.environ["MLTRAIN_WORKLOADS"] = str(Path(__file__).parents[1] / "workloads")
    try:
        for label, system, description, epoch_ms in (("h100", "eos_ngc24.04_mxnet", EOS, 420),
                                                     ("h200", "h200_ngc24.04_mxnet", H200, 400),
                                                     ("bare", "bare_8xh100", None, 410)):
            folder = _submission(root / label, system, description, epoch_ms)
            assert main(["-q", "import", str(folder), "--benchmark", "unet3d", "--label", label,
                         "--results", str(results)]) == 0
    finally:
        os.environ.pop("MLTRAIN_WORKLOADS")
    return results


def test_imported_systems_carry_their_own_facts_not_this_hosts(imported, cli):
    r = cli("compare", "--label", "h100", "--label", "h200", "--results", str(imported), "--json")
    assert r.code == 0, r.err
    facts = json.loads(r.out)["facts"]
    assert facts["h100"]["GPU"] == "NVIDIA H100-SXM5-80GB" and facts["h200"]["GPU"] == "NVIDIA H200-SXM5-141GB"
    assert facts["h100"]["driver"] == "535.129.03" and facts["h200"]["driver"] == "550.54.09"
    assert facts["h100"]["host CPU"] == "2x Intel(R) Xeon(R) Platinum 8480C"
    assert facts["h100"]["CUDA"] == "12.4.1.003" and facts["h100"]["framework"] == "MxNet NVIDIA Release 24.04"
    for side in ("h100", "h200"):  # neither this host's torch nor its CUDA, nor the mltrain that imported it
        assert facts[side]["torch"] == "?" and facts[side]["image"] == "?" and facts[side]["mltrain"] == "?"
    text = _said(cli("compare", "--label", "h100", "--label", "h200", "--results", str(imported)).out)
    assert "torch 2.13.0" not in text and "CPU build" not in text and "nothing known differs" not in text
    assert "what differs between the setups" in text and "driver 535.129.03 550.54.09" in text
    assert "the same in both: GPU count 8, nodes 1, CUDA 12.4.1.003, framework MxNet NVIDIA Release 24.04" in text
    assert "unknown for any setup: world size, torch, image, mltrain" in text


def test_a_fact_one_side_does_not_know_is_never_the_same(imported, cli):
    r = cli("compare", "--label", "h100", "--label", "bare", "--results", str(imported), "--json")
    facts = json.loads(r.out)
    assert all(value == "?" for name, value in facts["facts"]["bare"].items() if name != "runner")
    assert facts["rows"][1]["differs"] == []  # unknown is not different either
    text = _said(cli("compare", "--label", "h100", "--label", "bare", "--results", str(imported)).out)
    assert "nothing known differs between the setups; the same in both: runner imported" in text
    assert "unknown for bare: GPU, GPU count, nodes, driver, CUDA, framework, host CPU, dataset storage" in text


def test_the_report_says_imported_and_what_each_system_states(imported, cli, tmp_path):
    out = tmp_path / "r.html"
    assert cli("report", "--label", "h100", "--label", "h200", "--out", str(out), "--results", str(imported)).code == 0
    page = out.read_text()
    assert "<dt>imported</dt>" in page and "<dt>ran</dt>" not in page
    assert "the rest is the same" not in page and "2.13.0" not in page.split("<h2>Systems</h2>")[0]
    assert "they differ in GPU, driver; the same in both: GPU count 8" in page


def test_the_rcp_table_fits_80_columns_with_whole_headers_and_one_line_per_setup(imported, cli, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    out = cli("compare", "--label", "h100", "--label", "h200", "--results", str(imported)).out
    lines = out.splitlines()
    start = lines.index("convergence vs MLCommons' reference (RCP, epochs-to-target)")
    table = lines[start:start + 8]
    assert all(len(line) <= 80 for line in table), table
    header = next(line for line in table if line.strip().startswith("setup"))
    assert "epochs (mean, sd, n)" in header and "RCP mean, sd" in header
    rows = [line for line in table if line.strip().startswith(("h100", "h200"))]
    assert len(rows) == 2 and all("56" in row and "2000, 143.2, 32" in row for row in rows)  # no cell wrapped


def test_show_says_when_a_run_was_imported_not_when_it_ran(imported, cli):
    from orchestrator.results.store import Store

    run_id = next(row["run_id"] for row in Store(imported).list().rows if row["label"] == "h100")
    shown = cli("show", run_id, "--results", str(imported)).out
    assert "(where and when it ran is not recorded)" in shown and "\nstarted " not in shown
    assert shown.splitlines()[1].startswith("imported 20")
