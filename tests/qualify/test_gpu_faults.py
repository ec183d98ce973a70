"""The NVML test double drives each GPU fault to its verdict and reason, through a whole node
qualification (health read before, sampled under load, read after), with a canned GPU probe."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.errors import EXIT_INFRASTRUCTURE, EXIT_INVALID_RESULT, EXIT_OK, EXIT_WARN
from orchestrator.results.qualification import Status
from tests.qualify.nodes import H100, FakeNvml, cuda_probe_source, gpu_trace, node_trace, probe_source, run_node

RATES = {"gemm_bf16_8192x8192x8192": 280.0, "gemm_fp32_8192x8192x8192": 19.0}


@pytest.fixture
def node(mltrain_env, tmp_path: Path):
    def qualify(trace: dict | None = None, **kwargs):
        nvml = FakeNvml(trace if trace is not None else gpu_trace())
        return run_node(tmp_path / "results", nvml=nvml, probe=kwargs.pop("probe", probe_source(RATES)), **kwargs)

    return qualify


def health(record):
    return record.check("gpu_health")


def test_a_healthy_gpu_node_passes_and_notes_the_power_cap_as_normal(node):
    record = node()
    assert health(record).status is Status.PASS and record.verdict is Status.PASS and record.exit_code == EXIT_OK
    assert any("at its power limit under load" in n for n in health(record).facts["notes"])
    assert record.hardware.gpu_model == "NVIDIA A100-SXM4-80GB" and record.hardware.gpu_count == 2
    assert record.software["driver"] == "535.104.05"
    assert health(record).facts["load_samples"] >= 2  # sampled while the probe ran
    gemm = record.check("gemm")
    assert gemm.status is Status.PASS and {m.metric for m in gemm.measurements} == set(RATES)


def test_retired_pages_pending_fail(node):
    record = node(gpu_trace(device={"retired_pages_pending": 1}, gpu=1))
    assert health(record).status is Status.FAIL and record.verdict is Status.FAIL
    assert record.exit_code == EXIT_INVALID_RESULT
    assert health(record).reasons == ("GPU1 (00000000:28:00.0): retired pages pending (retirement waits for a GPU"
                                      " reset): drain the node and reset the GPU",)


@pytest.mark.parametrize(("bits", "reason"), [(0x40, "hw_thermal_slowdown"), (0x80, "hw_power_brake_slowdown"),
                                              (0x8, "hw_slowdown")])
def test_hardware_throttle_under_load_fails(node, bits: int, reason: str):
    record = node(gpu_trace(sample={"throttle_bits": bits}, gpu=0))
    assert health(record).status is Status.FAIL
    assert health(record).reasons[0] == f"GPU0 (00000000:18:00.0): {reason} under load in 100% of readings"


def test_thermal_software_slowdown_and_a_lowered_power_cap_warn(node):
    record = node(gpu_trace(sample={"throttle_bits": 0x20}, gpu=0))
    assert health(record).status is Status.WARN and record.verdict is Status.WARN and record.exit_code == EXIT_WARN
    assert "GPU0 (00000000:18:00.0): sw_thermal_slowdown under load in 100% of readings" in health(record).reasons[0]
    capped = gpu_trace(device={"power_limit_w": 300.0}, gpu=1)
    record = node(capped)
    assert health(record).status is Status.WARN
    assert ("GPU1 (00000000:28:00.0): sw_power_cap under load in 100% of readings at a 300 W limit, below its"
            " default 400 W") in health(record).reasons
    assert "GPU1 (00000000:28:00.0): power limit 300 W below its default 400 W" in health(record).reasons


def test_warn_exits_1_under_strict(node):
    record = node(gpu_trace(sample={"throttle_bits": 0x20}, gpu=0), strict=True)
    assert record.verdict is Status.WARN and record.exit_code == EXIT_INVALID_RESULT


def test_pcie_link_at_x8_of_x16_under_load_fails(node):
    record = node(gpu_trace(sample={"pcie_current_width": 8}, gpu=1))
    assert health(record).status is Status.FAIL
    assert health(record).reasons == ("GPU1 (00000000:28:00.0): PCIe link x8 of x16 under load: reseat the card or"
                                      " check the riser",)


def test_a_pcie_link_that_idles_at_a_lower_generation_is_judged_under_load(node):
    trace = gpu_trace()
    for device in trace["devices"]:
        device["pcie_current_generation"] = 1  # idle power saving: not a fault
    record = node(trace)
    assert health(record).status is Status.PASS


def test_ecc_uncorrectable_count_rising_during_the_qualification_fails(node):
    record = node(gpu_trace(device={"ecc_uncorrected_volatile": [0, 3]}, gpu=0))
    assert health(record).status is Status.FAIL
    assert health(record).reasons == ("GPU0 (00000000:18:00.0): uncorrectable ECC errors rose from 0 to 3 during the"
                                      " qualification",)
    record = node(gpu_trace(device={"ecc_corrected_volatile": [10, 12]}, gpu=1))
    assert health(record).status is Status.WARN
    assert health(record).reasons == ("GPU1 (00000000:28:00.0): correctable ECC errors rose from 10 to 12 during the"
                                      " qualification",)


def test_row_remapping_and_xid_events_fail(node):
    record = node(gpu_trace(device={"remapped_rows": [0, 1, 1, 0]}, gpu=0))
    assert health(record).reasons == ("GPU0 (00000000:18:00.0): row remapping pending: reset the GPU",)
    record = node(gpu_trace(device={"xids": [79]}, gpu=1))
    assert health(record).status is Status.FAIL
    assert "GPU1 (00000000:28:00.0): Xid 79 during the qualification" in health(record).reasons[0]


def test_gemm_rate_below_the_operators_lower_bound_fails_naming_the_reference(node, tmp_path: Path):
    references = tmp_path / "refs.yaml"
    references.write_text(
        "systems:\n"
        "  - model: NVIDIA A100-SXM4-80GB\n"
        "    source: acceptance runs of 2026-01-05 on gpu[01-08], median of 5\n"
        "    references:\n"
        "      gemm_bf16_8192x8192x8192: [250.0, -0.05, null, TFLOP/s]\n"
        "      gemm_fp32_8192x8192x8192: [19.5, -0.10, 0.10, TFLOP/s]\n"
    )
    record = node(probe=probe_source({"gemm_bf16_8192x8192x8192": 180.0, "gemm_fp32_8192x8192x8192": 19.0}),
                  references=references)
    gemm = record.check("gemm")
    assert gemm.status is Status.FAIL and record.verdict is Status.FAIL and record.exit_code == EXIT_INVALID_RESULT
    assert gemm.reasons == (
        "gemm_bf16_8192x8192x8192 180 TFLOP/s below the lower bound 237.5 (operator reference 250 TFLOP/s:"
        " refs.yaml (NVIDIA A100-SXM4-80GB): acceptance runs of 2026-01-05 on gpu[01-08], median of 5); measured"
        " again: first 180 TFLOP/s, then 180, 180: 2 of 2 repeat(s) failed too (2 needed): FAIL confirmed",
    )
    fp32 = next(m for m in gemm.measurements if m.metric == "gemm_fp32_8192x8192x8192")
    assert fp32.status is Status.PASS and fp32.reference.lower == pytest.approx(17.55)
    assert record.reasons[0].startswith("gemm: gemm_bf16_8192x8192x8192 180 TFLOP/s below the lower bound")


def test_a_node_without_gpus_says_not_applicable_never_passed(mltrain_env, tmp_path: Path):
    record = run_node(tmp_path / "r", nvml=FakeNvml(missing_library=True), probe=probe_source({}, device="cpu"))
    for name in ("gpu_health", "dcgm_diag"):
        check = record.check(name)
        assert check.status is Status.NOT_APPLICABLE and check.reason.startswith("no GPU on this host")
    assert record.verdict is Status.WARN and record.reasons[0].startswith("GPUs not qualified: none found")


def test_gpu_device_files_without_a_driver_fail(mltrain_env, tmp_path: Path):
    dev = tmp_path / "dev"
    dev.mkdir()
    (dev / "nvidia0").touch()
    record = run_node(tmp_path / "r", nvml=FakeNvml(missing_library=True), probe=probe_source({}, device="cpu"),
                      dev=dev)
    assert record.check("gpu_health").status is Status.FAIL
    assert "GPU device files exist (nvidia0) but NVML cannot read them" in record.check("gpu_health").reason


def test_a_probe_that_cannot_start_is_could_not_run(mltrain_env, tmp_path: Path):
    source = "import sys\nsys.stderr.write('error: torch is not installed where the probe runs\\n')\nsys.exit(3)\n"
    record = run_node(tmp_path / "r", probe=source)
    gemm = record.check("gemm")
    assert gemm.status is Status.INCONCLUSIVE and "torch is not installed where the probe runs" in gemm.reason
    assert record.verdict is Status.INCONCLUSIVE and record.exit_code == EXIT_INFRASTRUCTURE


@pytest.mark.parametrize("at", ["handle", "queries"])
@pytest.mark.parametrize(("error", "words"), [("GpuIsLost", "GPU is lost"), ("NoPermission", "no permission")])
def test_a_gpu_that_cannot_be_read_fails_naming_it(node, at: str, error: str, words: str):
    """Issue 18: GPU1 fell off the bus (every query: NVMLError_GpuIsLost, Xid 79) or sits outside this
    job's device cgroup (NoPermission), at the handle or at every query on it: FAIL naming GPU1."""
    record = node(gpu_trace(device={"fault": {"error": error, "at": at}}, gpu=1))
    assert health(record).status is Status.FAIL and record.verdict is Status.FAIL
    assert record.exit_code == EXIT_INVALID_RESULT
    reason = health(record).reasons[0]
    assert reason.startswith("GPU1") and words in reason, health(record).reasons
    assert not any(r.startswith("GPU0") for r in health(record).reasons)
    assert record.hardware.gpu_count == 2  # every GPU NVML sees, the lost one too


def test_cuda_that_cannot_use_the_gpus_nvml_sees_fails_naming_both_counts(node):
    """Issue 18: NVML sees two H100s, CUDA none (driver/CUDA mismatch, fabric manager down): the probe
    ran on the CPU; that is a FAIL naming each GPU and both counts, never a PASS of the CPU."""
    trace = node_trace([H100, H100])
    record = node(trace, probe=cuda_probe_source(trace, {"gemm_fp32_8192x8192x8192": 0.13}, usable=[]))
    assert record.verdict is Status.FAIL and record.exit_code == EXIT_INVALID_RESULT
    text = " | ".join(health(record).reasons)
    assert "NVML sees 2 GPUs but CUDA sees 0" in text, text
    assert "CUDA driver version is insufficient for CUDA runtime version" in text
    for index, slot in ((0, "00000000:18:00.0"), (1, "00000000:28:00.0")):
        assert f"GPU{index} ({slot}" in text
    gemm = record.check("gemm")
    assert gemm.status is Status.FAIL and "ran on the CPU" in gemm.reason and "2 GPUs" in gemm.reason


def test_fewer_gpus_in_cuda_than_in_nvml_fail_naming_the_missing_one(node):
    trace = node_trace([H100, H100])
    record = node(trace, probe=cuda_probe_source(trace, {"gemm_fp32_8192x8192x8192": 50.0}, usable=[0]))
    assert health(record).status is Status.FAIL and record.verdict is Status.FAIL
    text = " | ".join(health(record).reasons)
    assert "NVML sees 2 GPUs but CUDA sees 1" in text and "GPU1 (00000000:28:00.0" in text, text
    assert "GPU0 (" not in text.split("CUDA sees 1")[1]  # GPU0 is the one CUDA has: not named as missing


def test_one_slow_gpu_of_eight_fails_naming_it(node, tmp_path: Path):
    """Issue 18: the largest GEMM and the memory copy run on every GPU; a reference written for the metric
    holds for each GPU's, so GPU5 at 60% of its peers fails, by name and slot."""
    trace = node_trace([H100] * 8)
    per_gpu = {i: {"gemm_bf16_8192x8192x8192": 650.0, "device_copy_GBps": 2900.0} for i in range(8)}
    per_gpu[5]["gemm_bf16_8192x8192x8192"] = 390.0
    references = tmp_path / "refs.yaml"
    references.write_text(
        "systems:\n"
        f"  - model: {H100}\n"
        "    source: acceptance runs of 2026-01-05 on gpu[01-08], median of 5\n"
        "    references:\n"
        "      gemm_bf16_8192x8192x8192: [650.0, -0.10, null, TFLOP/s]\n"
    )
    record = node(trace, probe=cuda_probe_source(trace, per_gpu=per_gpu), references=references)
    gemm = record.check("gemm")
    assert gemm.status is Status.FAIL and record.verdict is Status.FAIL
    assert gemm.reasons == (
        "gemm_bf16_8192x8192x8192_gpu5 on GPU5 (00000000:68:00.0) 390 TFLOP/s below the lower bound 585 (operator"
        f" reference 650 TFLOP/s: refs.yaml ({H100}): acceptance runs of 2026-01-05 on gpu[01-08], median of 5);"
        " measured again: first 390 TFLOP/s, then 390, 390: 2 of 2 repeat(s) failed too (2 needed): FAIL confirmed",)
    judged = {m.metric: m for m in gemm.measurements}
    assert len(judged) == 8 and all(judged[f"gemm_bf16_8192x8192x8192_gpu{i}"].reference for i in range(8))
    memory = {m.metric for m in record.check("memory").measurements}
    assert memory == {f"device_copy_GBps_gpu{i}" for i in range(8)}


def test_mig_mode_on_warns_naming_the_gpu_and_explains_the_count(node):
    """MIG on GPU0: CUDA sees its instances, not the GPU; the node's checks measured one instance."""
    trace = node_trace([H100, H100], mig=(0,))
    record = node(trace, probe=cuda_probe_source(trace, usable=[1]))
    reasons = health(record).reasons
    assert any(r.startswith("GPU0 (00000000:18:00.0): MIG mode is on") for r in reasons), reasons
    assert any("NVML sees 2 GPUs but CUDA sees 1: CUDA cannot use GPU0 (00000000:18:00.0) (MIG mode is on for"
               " GPU0 (00000000:18:00.0)" in r for r in reasons), reasons
    assert health(record).status is Status.FAIL  # the count: a GPU the checks did not reach
