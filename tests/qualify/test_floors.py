"""Reference floors of known GPU models (issue 18): a new node is judged on its first run, against a
stated fraction of its model's datasheet peak or published MLPerf rate, each with its source; the
operator's file overrides a floor, and the node's or the fleet's history tightens it."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.errors import EXIT_INVALID_RESULT, ConfigError
from orchestrator.mlperf import published
from orchestrator.qualify.floors import FILE, load_floors, published_rate
from orchestrator.qualify.references import References
from orchestrator.results.qualification import CheckResult, Measurement, Reference, Status
from tests.qualify.nodes import H100, FakeNvml, cuda_probe_source, node_trace, run_node

HEALTHY_H100 = {"gemm_bf16_8192x8192x8192": 650.0, "gemm_fp32_8192x8192x8192": 50.0, "device_copy_GBps": 2900.0}


def first_run(tmp_path: Path, per_gpu: dict[str, float], **kwargs):
    trace = node_trace([H100, H100])
    return run_node(tmp_path / "results", nvml=FakeNvml(trace),
                    probe=cuda_probe_source(trace, per_gpu={0: per_gpu, 1: per_gpu}), **kwargs)


def test_a_new_node_40_percent_slow_on_gemm_fails_on_its_first_run_naming_the_floor_and_its_source(
        mltrain_env, tmp_path: Path):
    slow = {metric: value * 0.6 for metric, value in HEALTHY_H100.items()}
    record = first_run(tmp_path, slow)
    assert record.verdict is Status.FAIL and record.exit_code == EXIT_INVALID_RESULT
    assert record.system["history"].startswith("0 of the 3 passing runs")  # no history: the floor judged it
    gemm = record.check("gemm")
    assert gemm.status is Status.FAIL
    reason = next(r for r in gemm.reasons if r.startswith("gemm_bf16_8192x8192x8192_gpu1"))
    assert reason.startswith("gemm_bf16_8192x8192x8192_gpu1 on GPU1 (00000000:28:00.0) 390 TFLOP/s below the lower"
                             " bound 494.8 (floor reference 989.5 TFLOP/s: floor 50% (H100 SXM5 bf16 dense peak"
                             " 989.5 TFLOP/s; half of the datasheet peak"), reason
    assert reason.endswith("source: NVIDIA H100 Tensor Core GPU datasheet (2023), H100 SXM: FP32 67 TFLOPS, TF32"
                           " tensor 989* TFLOPS, BF16 and FP16 tensor 1,979* TFLOPS (* with sparsity; dense is half:"
                           " 494.5 and 989.5), GPU memory bandwidth 3.35 TB/s); measured again: first 390 TFLOP/s,"
                           " then 390, 390: 2 of 2 repeat(s) failed too (2 needed): FAIL confirmed"), reason
    memory = record.check("memory")
    assert memory.status is Status.FAIL and "below the lower bound 2010 (floor reference 3350 GB/s" in memory.reason
    fp32 = next(m for m in gemm.measurements if m.metric == "gemm_fp32_8192x8192x8192_gpu0")
    assert fp32.status is Status.FAIL and fp32.reference.lower == pytest.approx(33.5)  # 67 TFLOPS x 50%


def test_a_healthy_new_node_passes_its_floors(mltrain_env, tmp_path: Path):
    record = first_run(tmp_path, HEALTHY_H100)
    assert record.verdict is Status.PASS, record.reasons
    judged = record.check("gemm").measurements
    assert {m.reference.kind for m in judged} == {"floor"} and len(judged) == 4


def test_a_gemm_off_the_kernels_tiles_is_not_judged_against_the_peak(mltrain_env, tmp_path: Path):
    """What a healthy H100 SXM did on 2026-11-24 (torch 2.11, CUDA 13.0): the DeepBench 5124x9124x2560,
    whose 16-bit rows are not 16-byte aligned, at a quarter of the dense peak; judged against the
    floor, every H100 of a fleet failed its first nightly run."""
    seen = {"gemm_fp16_5124x9124x2560": 236.0, "gemm_bf16_5124x9124x2560": 237.7,
            "gemm_tf32_5124x9124x2560": 267.9, "gemm_fp32_5124x9124x2560": 46.6}
    record = first_run(tmp_path, {**HEALTHY_H100, **seen})
    assert record.verdict is Status.PASS, record.reasons
    by_metric = {m.metric: m for m in record.check("gemm").measurements}
    assert all(by_metric[f"{metric}_gpu{i}"].reference is None for metric in seen for i in (0, 1))
    assert by_metric["gemm_bf16_8192x8192x8192_gpu0"].reference.kind == "floor"


def test_the_operators_reference_overrides_a_floor(mltrain_env, tmp_path: Path):
    references = tmp_path / "refs.yaml"
    references.write_text(f"systems:\n  - model: {H100}\n    source: our H100s at 500 W caps, 2026-02\n"
                          "    references: {gemm_bf16_8192x8192x8192: [420.0, -0.10, null, TFLOP/s]}\n")
    record = first_run(tmp_path, {**HEALTHY_H100, "gemm_bf16_8192x8192x8192": 400.0}, references=references)
    bf16 = [m for m in record.check("gemm").measurements if m.metric.startswith("gemm_bf16")]
    assert all(m.reference.kind == "operator" and m.status is Status.PASS for m in bf16), bf16


def ref(kind: str, lower: float | None, upper: float | None = None) -> Reference:
    return Reference(value=1000.0, lower=lower, upper=upper, unit="TFLOP/s", kind=kind, source=kind)


@pytest.mark.parametrize(("node", "fleet", "picked"), [
    (600.0, None, "history"),   # the node's history is stricter than the floor: it judges
    (400.0, None, "floor"),     # a node that learned its own slowness cannot loosen the floor
    (400.0, 620.0, "fleet"),    # the fleet's history, stricter than both
    (None, None, "floor"),      # no history yet: the floor
])
def test_history_tightens_a_floor_and_the_stricter_wins(node, fleet, picked):
    m = Measurement(metric="gemm_bf16_8192x8192x8192_gpu3", value=700.0, unit="TFLOP/s")
    refs = References(node={m.metric: ref("history", node)} if node else {},
                      fleet={m.metric: ref("fleet", fleet)} if fleet else {},
                      floors={m.metric: ref("floor", 494.75)})
    assert refs.pick(m).kind == picked
    operator = References(operator={"gemm_bf16_8192x8192x8192": ref("operator", 100.0)}, floors=refs.floors)
    assert operator.pick(m).kind == "operator"  # written for the metric, it holds for each GPU's case
    lower_is_better = Measurement(metric="step_ms_median", value=10.0, unit="ms", better="lower")
    tighter = References(node={"step_ms_median": ref("history", 5.0, 12.0)},
                         fleet={"step_ms_median": ref("fleet", 1.0, 11.0)})
    assert tighter.pick(lower_is_better).kind == "fleet"


NAMES = {
    "V100": ["Tesla V100-SXM2-16GB", "Tesla V100-SXM2-32GB", "Tesla V100-PCIE-16GB", "Tesla V100-PCIE-32GB"],
    "T4": ["Tesla T4"], "A10": ["NVIDIA A10"],
    "A100": ["NVIDIA A100-PCIE-40GB", "NVIDIA A100 80GB PCIe", "NVIDIA A100-SXM4-40GB", "NVIDIA A100-SXM4-80GB"],
    "H100": ["NVIDIA H100 PCIe", "NVIDIA H100 80GB HBM3"], "H200": ["NVIDIA H200"], "L4": ["NVIDIA L4"],
    "L40S": ["NVIDIA L40S"],
}


def test_every_common_gpu_has_a_floor_with_its_source():
    floors = load_floors()
    for family, names in NAMES.items():
        for name in names:
            model = floors.model(name)
            assert model is not None, name
            assert "datasheet" in model.source and family in model.source, (name, model.source)
            assert model.memory_gbps > 0 and model.gemm_tflops["fp32"] > 0
    assert floors.model("NVIDIA GeForce RTX 4090") is None and floors.model("AMD EPYC 7763") is None
    assert floors.model("NVIDIA A100-SXM4-80GB").gemm_tflops["bf16"] == 312  # dense, not the sparse 624


def test_a_broken_floors_file_is_one_line_naming_the_field(tmp_path: Path):
    text = (Path(load_floors.__defaults__[0]).read_text()  # the shipped file, with one fraction broken
            .replace("fraction: 0.5\n  why: >-\n    half of the datasheet peak", "fraction: 1.5\n  why: >-\n    x", 1))
    broken = tmp_path / FILE
    broken.write_text(text)
    with pytest.raises(ConfigError, match=r"floors.yaml: invalid field gemm.fraction: Input should be less than or"):
        load_floors(broken)
    broken.write_text(Path(load_floors.__defaults__[0]).read_text().replace("[NVIDIA L4]", "[NVIDIA L40S]"))
    with pytest.raises(ConfigError, match="NVML name 'NVIDIA L40S' is given to two models"):
        load_floors(broken)


def test_the_unet3d_floor_is_a_quarter_of_the_published_per_gpu_rate_times_the_processes():
    floors = load_floors()
    h100 = floors.model(H100)
    rate = published_rate("unet3d", h100.mlperf_accelerators, published.load())
    assert 55 < rate.value < 65 and len(rate.systems) >= 30  # NVIDIA's v4.0 8xH100: ~61 samples/s per GPU

    def throughput(env: dict, global_batch: int = 16) -> CheckResult:
        return CheckResult(name="throughput", kind="workload", status=Status.PASS, sanity=Status.PASS,
                           measurements=(Measurement(metric="throughput_samples_per_s", value=300.0,
                                                     unit="samples/s"),),
                           facts={"env": env, "metadata": {"global_batch_size": global_batch, "batch_size": 2}})

    closed = throughput({"INPUT_SHAPE": "128,128,128", "BATCH_SIZE": "2"})
    floor = floors.references([closed], {None: H100}, "unet3d")["throughput_samples_per_s"]
    assert floor.kind == "floor" and floor.lower == pytest.approx(0.25 * rate.value * 8)
    assert "published MLPerf Training unet3d results" in floor.source and "x 8 process(es)" in floor.source
    assert floors.references([throughput({"INPUT_SHAPE": "64,64,64"})], {None: H100}, "unet3d") == {}
    assert floors.references([closed], {None: H100}, "resnet50") == {}
    assert floors.references([closed], {None: "NVIDIA L4"}, "unet3d") == {}  # no published unet3d on L4


def test_the_all_reduce_floor_of_a_published_node_applies_only_to_its_gpu_count_and_message_size():
    """Azure's ND H100 v5 threshold (8 GPUs, 16 GiB messages): a smaller buffer or node is not judged by it."""
    from types import SimpleNamespace

    floors = load_floors()
    nccl = CheckResult(name="nccl", kind="microbenchmark", status=Status.PASS, sanity=Status.PASS,
                       measurements=(Measurement(metric="allreduce_busbw_GBps", value=400.0, unit="GB/s"),))
    models = {None: H100}
    big = floors.references([nccl], models, "fakebench", gpu_count=8, settings=lambda name: SimpleNamespace(mb=16384))
    ref = big["allreduce_busbw_GBps"]
    assert (ref.lower, ref.kind) == (460.0, "floor") and "nd96isr_h100_v5.conf" in ref.source
    assert not floors.references([nccl], models, "fakebench", gpu_count=8, settings=lambda name: SimpleNamespace(
        mb=256))
    assert not floors.references([nccl], models, "fakebench", gpu_count=4, settings=lambda name: SimpleNamespace(
        mb=16384))
