"""All-reduce between pairs of a fleet's nodes (the nccl_pairs check): each node paired with its two
ring neighbours, pairs of a round sharing no node; a stand-in measurer makes one node (or one link)
slow and the check names it, FAILs its row in the fleet's table and asks to check the fabric. On the
CI's real Slurm, the probe's pair check runs as two jobs (gloo on CPUs) and measures."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from orchestrator import text
from orchestrator.qualify.catalog import default_registry
from orchestrator.qualify.checks.pairs import FleetContext
from orchestrator.qualify.fleet import with_findings
from orchestrator.qualify.pairs import Pair, PairReading, ring, rounds
from orchestrator.results.qualification import FleetRow, Reference, Remedy, Status
from tests.conftest import TEST_WORKLOADS
from tests.qualify.nodes import probe_of, suite_of

CHECK = default_registry().get("nccl_pairs")
SETTINGS = CHECK.declaration.settings()  # its declared defaults: slow_pct 20


def stand_in(slow: dict[str, float] | None = None, links: dict[Pair, float] | None = None, healthy: float = 20.0):
    """A measurer: every pair at ``healthy`` GB/s, a pair with a node of ``slow`` at that node's rate, a
    pair of ``links`` at its own; records the batches it was given."""
    batches: list[list[Pair]] = []

    def measure(batch: Sequence[Pair]) -> list[PairReading]:
        batches.append(list(batch))
        readings = []
        for pair in batch:
            rate = (links or {}).get(pair, min([healthy, *((slow or {}).get(n, healthy) for n in pair)]))
            readings.append(PairReading(pair=pair, value=rate, sanity="all-reduce sum of 2 ranks is 3"))
        return readings

    measure.batches = batches  # type: ignore[attr-defined]
    return measure


def run(nodes: list[str], measure, reference: Reference | None = None):
    ctx = FleetContext(nodes=nodes, settings=lambda kind: SETTINGS, measure=measure, reference=reference)
    return CHECK.run_fleet(ctx)


def test_each_node_is_paired_with_its_two_neighbours_and_a_round_shares_no_node():
    assert ring(["n2", "n1"]) == [("n1", "n2")] and ring(["n1"]) == []
    pairs = ring([f"n{i}" for i in range(1, 5)])
    assert pairs == [("n1", "n2"), ("n2", "n3"), ("n3", "n4"), ("n4", "n1")]
    assert rounds(pairs) == [[("n1", "n2"), ("n3", "n4")], [("n2", "n3"), ("n4", "n1")]]
    assert len(rounds(ring(["a", "b", "c"]))) == 3  # an odd ring needs three


def test_a_node_slow_with_both_its_peers_is_named_and_its_row_fails():
    measure = stand_in(slow={"n3": 5.0})
    nodes = [f"n{i}" for i in range(1, 6)]
    result, findings = run(nodes, measure)
    assert result.status is Status.FAIL and result.kind == "fabric" and result.sanity is Status.PASS
    assert [f.node for f in findings] == ["n3"]
    assert findings[0].reason.startswith("node n3 is slow with each of its peers: n2-n3 5 GB/s is 75% below the"
                                         " median of the fleet's 5 pairs, 20 GB/s (slow_pct 20)")
    assert [(r.action, r.node) for r in result.remediation] == [(Remedy.CHECK_FABRIC, "n3")]
    assert len(measure.batches) == 3 and sum(map(len, measure.batches)) == 5  # five ring pairs in three rounds
    rows = with_findings([row(n) for n in nodes], result.name, findings)
    slow = next(r for r in rows if r.node == "n3")
    assert slow.verdict is Status.FAIL and slow.reason.startswith("nccl_pairs: node n3 is slow")
    assert [(r.action, r.node) for r in slow.remediation] == [(Remedy.CHECK_FABRIC, "n3")]
    assert all(r.verdict is Status.PASS for r in rows if r.node != "n3")


def row(node: str) -> FleetRow:
    return FleetRow(node=node, hardware="2 CPUs Test CPU", verdict=Status.PASS)


def test_a_slow_link_between_two_healthy_nodes_names_both():
    result, findings = run(["n1", "n2", "n3", "n4"], stand_in(links={("n2", "n3"): 4.0}))
    assert [f.node for f in findings] == ["n2", "n3"]
    assert findings[0].reason.endswith("the link between n2 and n3 (each is fine with its other peer)")


def test_of_two_nodes_a_slow_pair_names_both_against_the_operators_reference():
    reference = Reference(value=40.0, lower=36.0, upper=None, unit="GB/s", kind="operator", source="refs: acceptance")
    result, findings = run(["a", "b"], stand_in(healthy=20.0), reference)
    assert result.status is Status.FAIL and [f.node for f in findings] == ["a", "b"]
    assert "20 GB/s below the lower bound 36 (operator reference: refs: acceptance)" in findings[0].reason
    assert findings[0].reason.endswith("one of its two nodes (one pair cannot tell which)")
    result, findings = run(["a", "b"], stand_in(healthy=40.0), reference)
    assert result.status is Status.PASS and not findings and result.measurements[0].metric == (
        "allreduce_pair_busbw_GBps:a-b")


def test_a_pair_that_could_not_all_reduce_fails_one_that_could_not_start_is_inconclusive():
    def measure(batch):
        return [PairReading(pair=p, failed="rank 1: NCCL error: unhandled system error") if "n2" in p
                else PairReading(pair=p, unrun="sbatch: error: invalid partition") if "n4" in p
                else PairReading(pair=p, value=20.0) for p in batch]

    result, findings = run(["n1", "n2", "n3"], measure)
    assert result.status is Status.FAIL and result.sanity is Status.FAIL and [f.node for f in findings] == ["n2"]
    result, findings = run(["n4", "n5"], measure)
    assert result.status is Status.INCONCLUSIVE and not findings
    assert result.reasons == ("n4-n5: could not run: sbatch: error: invalid partition",)


def test_a_pair_number_outside_its_sane_range_is_no_measurement():
    """-5 GB/s, or 0, is neither a slow link nor a pass: named, kept out of the fleet's median, INCONCLUSIVE."""
    def measure(batch):
        return [PairReading(pair=p, value=-5.0 if "n2" in p and "n3" in p else 20.0) for p in batch]

    result, findings = run(["n1", "n2", "n3", "n4"], measure)
    assert result.status is Status.INCONCLUSIVE and not findings, result.reasons
    assert result.reasons == ("n2-n3: allreduce_pair_busbw_GBps -5 GB/s is no measurement: a nccl_pairs number is"
                              " above 0 and at most 100000 (its sanity rule): the check measured nothing the node"
                              " can be judged by",)
    assert len(result.measurements) == 3 and result.facts["median_GBps"] == 20.0


def test_one_node_is_not_a_pair():
    result, findings = run(["n1"], stand_in())
    assert result.status is Status.NOT_APPLICABLE and result.reason == ("nccl_pairs needs 2 or more nodes; the fleet"
                                                                        " has 1") and not findings


@pytest.mark.slurm
def test_on_the_real_slurm_a_pair_all_reduces_with_gloo(slurm_env, mltrain_env, tmp_path: Path):
    """The CI's one node paired with itself: two Slurm jobs, the probe's pair check in each, gloo over
    the node's address; rank 0's bus bandwidth read back, the sum checked."""
    from orchestrator.commands.common import registry
    from orchestrator.qualify.pairs import SlurmPairs
    from orchestrator.runners.slurm import node_names

    (node,) = node_names()[:1]
    suite = suite_of(cpu={"nccl_pairs": {"mb": 4, "iterations": 5, "warmup": 1}})
    measure = SlurmPairs(declaration=CHECK.declaration, suite=suite, probe=probe_of(),
                         workload=registry().get("fakebench"), run_id="fleet-pairs-test", folder=tmp_path / "pairs")
    (reading,) = measure([(node, node)])
    assert reading.value is not None and reading.value > 0, reading
    assert reading.sanity == "all-reduce sum of 2 ranks is 3 in every element"


@pytest.mark.parametrize(("suite_keys", "check_keys", "minutes"), [
    ({}, {}, 10.0),                                   # the check's declared timeout (600 s)
    ({}, {"timeout_minutes": 2}, 2.0),                # the check's own setting
    ({"probe_timeout_minutes": 3}, {}, 3.0),          # the suite's, for every probe check without one
    ({"probe_timeout_minutes": 3}, {"timeout_minutes": 2}, 2.0),
])
def test_a_pairs_jobs_take_the_checks_timeout_from_the_suite_as_on_one_node(monkeypatch, tmp_path: Path,
                                                                           suite_keys, check_keys, minutes):
    """The pair jobs used the declared 600 s whatever qualify.yaml said: a suite's `timeout_minutes`
    for nccl_pairs, valid and stored, changed nothing. Slurm's limit is the timeout and 5 minutes,
    mltrain's the timeout and the time both jobs may wait to be scheduled; a hang says that limit."""
    from orchestrator.config.workloads import load_workload
    from orchestrator.qualify import pairs as pairs_module
    from orchestrator.results.records import Exit
    from orchestrator.runners.outcome import JobOutcome

    given: list[tuple[float, float]] = []  # (Slurm's time limit in minutes, mltrain's limit in seconds)

    class HungJob:
        job_id = "4242"

        def finish(self) -> JobOutcome:
            return JobOutcome(job_id="4242", exit=Exit(code=None), timed_out=True, lost="", seconds=0.0,
                              log=tmp_path / "output.log")

    def start_job(runner, spec, *, timeout_s, on_line):
        given.append((runner.options.time_limit_minutes, timeout_s))
        return HungJob()

    monkeypatch.setattr(pairs_module, "node_gpus", lambda node: 0)
    monkeypatch.setattr(pairs_module, "node_address", lambda node: "127.0.0.1")
    monkeypatch.setattr(pairs_module, "start_job", start_job)
    monkeypatch.setattr(pairs_module, "make_runner", lambda options, status: type("R", (), {"options": options})())
    suite = suite_of(**suite_keys, cpu={"nccl_pairs": {"mb": 4, **check_keys}})
    measure = pairs_module.SlurmPairs(declaration=CHECK.declaration, suite=suite, probe=probe_of(),
                                      workload=load_workload(TEST_WORKLOADS / "fakebench"), run_id="t", folder=tmp_path)
    (reading,) = measure([("n1", "n2")])
    assert given == [(minutes + 5, minutes * 60 + pairs_module.QUEUE_S)] * 2
    limit = text.duration((minutes * 60 + pairs_module.QUEUE_S) * 1000)
    assert reading.value is None and reading.unrun == (f"nccl_pairs did not finish within its {limit} timeout between"
                                                       " n1 and n2: stopped, the other checks ran on")
