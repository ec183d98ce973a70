"""Host-device bandwidth per GPU, both ways, and between GPUs (the bandwidth check, as nvbandwidth
times it), judged against a floor per PCIe generation and width: the probe's cases run on a CUDA
stand-in (tests/qualify/fake_cuda.py) whose GPU 1 copies at half the rate, and a node whose GPU 1
copies at half its gen 4 x16 rate FAILs that GPU, asking for a reseat."""

from __future__ import annotations

import json
from pathlib import Path

from orchestrator.qualify.catalog import default_registry
from orchestrator.qualify.floors import load_floors
from orchestrator.results.qualification import Remedy, Status
from tests.qualify.fake_cuda import FakeGpus
from tests.qualify.nodes import FakeNvml, cuda_probe_source, gpu_trace, run_node
from workloads.common.probe import bandwidth, harness, protocol, registry


def run_cases(capsys, device: FakeGpus, mb: int = 2) -> dict[str, dict]:
    context = harness.Context(device=device, seconds=0.05, max_repeats=20)
    for case in harness.plan(bandwidth, registry.with_defaults(bandwidth.DECLARATION, {"mb": mb}), context):
        harness.run_case(case, device)
    lines = [json.loads(line.removeprefix(protocol.PREFIX)) for line in capsys.readouterr().out.splitlines()]
    return {line["metric"]: line for line in lines if line["kind"] == "result"}


def test_every_gpu_is_timed_both_ways_and_to_its_peers_each_copy_verified(capsys):
    results = run_cases(capsys, FakeGpus(gpu_count=3))
    assert set(results) == {f"{m}_gpu{i}" for m in ("h2d_GBps", "d2h_GBps", "d2d_min_GBps") for i in range(3)}
    declared = default_registry().declaration("bandwidth")
    for metric, line in results.items():
        assert line["sanity"]["passed"] is True and line["performance"]["value"] > 0, metric
        assert declared.unit(metric.rsplit("_gpu", 1)[0]) == line["performance"]["unit"] == "GB/s"
    assert results["d2d_min_GBps_gpu0"]["sanity"]["detail"] == "2 peer copies of 2 MiB verified byte for byte"
    assert results["h2d_GBps_gpu2"]["gpu"] == 2


def test_a_gpu_whose_copies_take_twice_as_long_measures_half_the_rate(capsys):
    # A 2 MiB copy took 60 ms of wall time on a host at load 23 (2 cores): more than the stand-in's default
    # 20 ms of queued work, which then no longer set the rate, and the slow GPU read 0.91x the healthy one.
    # 100 ms of queued work per synchronisation keeps the rate the stand-in's on such a host.
    results = run_cases(capsys, FakeGpus(gpu_count=2, slow={1: 2.0}, work_s=0.1))
    for way in ("h2d_GBps", "d2h_GBps"):
        healthy, halved = (results[f"{way}_gpu{i}"]["performance"]["value"] for i in (0, 1))
        assert halved < 0.75 * healthy, (way, healthy, halved)


def test_one_gpu_or_none(capsys):
    assert set(run_cases(capsys, FakeGpus(gpu_count=1))) == {"h2d_GBps", "d2h_GBps"}  # plain names, no peers
    cpu = harness.Context(device=FakeGpus(kind="cpu", gpu_count=0))  # type: ignore[arg-type]
    (skip,) = harness.plan(bandwidth, registry.with_defaults(bandwidth.DECLARATION, {}), cpu)
    assert skip.skip == "bandwidth needs a CUDA device; this is a CPU"


def test_the_floor_follows_the_link_nvml_gives():
    floors = load_floors()
    from orchestrator.results.qualification import CheckResult, Measurement

    check = CheckResult(name="bandwidth", kind="microbenchmark", status=Status.PASS, sanity=Status.PASS,
                        measurements=(Measurement(metric="h2d_GBps_gpu0", value=50.0, unit="GB/s"),
                                      Measurement(metric="h2d_GBps_gpu1", value=50.0, unit="GB/s")))
    refs = floors.references([check], {}, "fakebench", links={0: (4, 16), 1: (5, 16)})
    assert round(refs["h2d_GBps_gpu0"].lower, 1) == 23.6 and round(refs["h2d_GBps_gpu1"].lower, 1) == 47.3
    assert "PCIe gen 5 x16" in refs["h2d_GBps_gpu1"].source and "check_cuda_bw" in refs["h2d_GBps_gpu1"].source


def test_a_node_whose_gpu_copies_at_half_its_link_rate_fails_that_gpu(mltrain_env, tmp_path: Path):
    """Two A100s on PCIe gen 4 x16 (31.5 GB/s raw, floor 23.6): GPU0 copies at 25 GB/s, GPU1 at half."""
    trace = gpu_trace()
    per_gpu = {0: {"h2d_GBps": 25.0, "d2h_GBps": 26.0, "d2d_min_GBps": 20.0},
               1: {"h2d_GBps": 12.5, "d2h_GBps": 13.0, "d2d_min_GBps": 20.0}}
    config = tmp_path / "bw.yaml"
    config.write_text("workload: fakebench\nsuites:\n  bw: {cpu: {bandwidth: {}}, cuda: {bandwidth: {}}}\n")
    record = run_node(tmp_path / "r", nvml=FakeNvml(trace), probe=cuda_probe_source(trace, per_gpu=per_gpu),
                      config=config, suite="bw")
    check = record.check("bandwidth")
    assert check.status is Status.FAIL and check.sanity is Status.PASS and record.verdict is Status.FAIL
    judged = {m.metric: m for m in check.measurements}
    assert judged["h2d_GBps_gpu0"].status is Status.PASS and judged["d2h_GBps_gpu0"].status is Status.PASS
    slow = judged["h2d_GBps_gpu1"]
    assert slow.status is Status.FAIL and slow.reference.kind == "floor" and slow.quorum.outcome == "confirmed"
    assert slow.reason.startswith("h2d_GBps_gpu1 on GPU1 (00000000:28:00.0) 12.5 GB/s below the lower bound 23.63"
                                  " (floor reference 31.5 GB/s: floor 75% (PCIe gen 4 x16")
    assert [(r.action, r.gpu) for r in record.remediation] == [(Remedy.RESEAT, 1)]
