"""The one table of MLPerf's rules per benchmark (`orchestrator.mlperf.benchmarks`): what it reads
from mlperf_logging, and the few facts it types itself held against the installed package and the
shipped published results, so that a new mlperf-logging release that changes them fails here."""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path

import pytest
import yaml
from mlperf_logging import compliance_checker, rcp_checker
from mlperf_logging.result_summarizer import result_summarizer

from orchestrator.config.workloads import Registry
from orchestrator.errors import ConfigError, UsageError
from orchestrator.mlperf import benchmarks, published

PROJECT = Path(__file__).resolve().parents[2]
MAX_EPOCHS = 10_000
"""unet3d's epoch cap (../shared/spec/scoring.md): an RCP value above it counts samples."""


def test_runs_drops_and_rulesets_of_the_benchmarks_mltrain_runs():
    unet3d, resnet, lora = (benchmarks.get(n) for n in ("unet3d", "resnet", "llama2_70b_lora"))
    assert (unet3d.runs, unet3d.drop_per_end, unet3d.max_non_converged) == (40, 4, 4)
    assert (resnet.runs, resnet.drop_per_end, resnet.max_non_converged) == (5, 1, 1)
    assert (lora.runs, lora.drop_per_end) == (10, 1)
    assert unet3d.default_ruleset == resnet.default_ruleset == "4.0.0"  # the last round that had them
    assert lora.rulesets[0] == "4.0.0" and lora.default_ruleset == benchmarks.latest_ruleset()
    assert benchmarks.get("rnnt").default_ruleset == "3.1.0"
    assert unet3d.rule().model_dump() == {"drop_per_end": 4, "max_non_converged": 4, "runs_required": 40}


def test_the_typed_drops_are_the_summarizers_own():
    """The summarizer decides the drops in code: its line is read, and the table must say the same."""
    source = inspect.getsource(result_summarizer._compute_strong_score_standalone)
    found = re.findall(r'max_dropped_scores = (\d+) if benchmark == "(\w+)" else (\d+)', source)
    assert found, "the summarizer no longer decides its drops in one line: read it again"
    assert {name: int(drop) for drop, name, _ in found} == benchmarks.SUMMARIZER_DROPS
    assert {int(default) for *_, default in found} == {benchmarks.DEFAULT_DROPS}


def test_every_benchmark_mlperf_logging_knows_is_in_the_table():
    from mlperf_logging.benchmark_meta import get_result_file_counts

    assert set(benchmarks.names()) == set(get_result_file_counts("training"))
    for name in benchmarks.names():
        rules = benchmarks.get(name)
        assert rules.runs >= 1 and set(rules.rcp_rulesets) <= set(rules.rulesets)


def rcp_values(ruleset: str, benchmark: str) -> list[float]:
    table = json.loads((Path(rcp_checker.__file__).parent / f"training_{ruleset}" / f"rcps_{benchmark}.json")
                       .read_text())
    return [v for record in table.values() for v in record.get("Epochs to converge", [])]


@pytest.mark.parametrize("ruleset", benchmarks.get("unet3d").rcp_rulesets)
def test_the_rcp_tables_counted_in_samples_are_the_ones_whose_values_exceed_any_epoch_count(ruleset: str):
    values = rcp_values(ruleset, "unet3d")
    assert benchmarks.get("unet3d").rcp_counts_samples(ruleset) == (min(values) > MAX_EPOCHS)


def test_llama31_8b_takes_its_rules_from_the_package_and_its_rcps_count_samples():
    llama = benchmarks.get("llama31_8b")
    assert (llama.runs, llama.drop_per_end, llama.max_non_converged) == (10, 1, 1)
    assert "6.1.0" in llama.rulesets and llama.rcp_rulesets == ("5.1.0", "6.0.0", "6.1.0")
    # the RCP checker reads llama31_8b's convergence point from samples_count, never epoch_num
    source = inspect.getsource(rcp_checker.rcp_checker.read_submission_file)
    line = next(line for line in source.splitlines() if '"llama31_8b"' in line)
    assert "eval_accuracy" in line and all(llama.rcp_counts_samples(r) for r in llama.rcp_rulesets)
    assert min(rcp_values("6.1.0", "llama31_8b")) % 1024 == 0  # sequences, multiples of the global batch


def test_the_published_facts_cover_the_shipped_results_and_match_the_closed_rules():
    assert {s.benchmark for s in published.load()} == set(benchmarks.with_published_results())
    checks = Path(compliance_checker.__file__).parent
    for ruleset in benchmarks.get("unet3d").rulesets:  # KiTS19's 168 cases: the closed rules check it
        assert " v['value'] == 168" in (checks / f"training_{ruleset}" / "closed_unet3d.yaml").read_text()
    assert benchmarks.get("unet3d").train_samples == 168
    assert benchmarks.get("llama2_70b_lora").train_samples is None and not benchmarks.get("rnnt").published


def declared_workloads() -> list:
    registry = Registry([PROJECT / "workloads", PROJECT / "tests" / "workloads"])
    return [registry.get(name) for name in registry.names()]


@pytest.mark.parametrize("workload", declared_workloads(), ids=lambda w: w.name)
def test_each_workload_declares_the_target_and_direction_its_ruleset_checks(workload):
    """A workload's quality declaration is the closed rule of the benchmark in its ruleset:
    `v['value'] >= 0.908` for unet3d's Dice, `v['value'] <= 0.925` for llama2_70b_lora's loss."""
    ruleset = benchmarks.ruleset_of(workload)
    rules = yaml.safe_load((Path(compliance_checker.__file__).parent / f"training_{ruleset}"
                            / f"closed_{workload.mlperf_benchmark}.yaml").read_text())
    check = next(r["KEY"]["ATLEAST_ONE_CHECK"] for r in rules
                 if "KEY" in r and r["KEY"]["NAME"] == workload.quality.metric and "ATLEAST_ONE_CHECK" in r["KEY"])
    operator, target = re.search(r"v\['value'\] (>=|<=) ([0-9.]+)", check).groups()
    assert operator == (">=" if workload.quality.better == "higher" else "<=")
    assert float(target) == workload.quality.target


def test_a_declared_ruleset_is_checked_against_the_benchmark():
    workload = Registry([PROJECT / "workloads"]).get("unet3d")
    assert benchmarks.ruleset_of(workload.model_copy(update={"ruleset": None})) == "4.0.0"
    with pytest.raises(ConfigError, match=r"workload\.yaml: ruleset 5\.0\.0: unet3d is not a benchmark of training"
                                          r" 5\.0\.0; use one of 1\.0\.0, .*, 4\.0\.0$"):
        benchmarks.ruleset_of(workload.model_copy(update={"ruleset": "5.0.0"}))
    with pytest.raises(ConfigError, match=r"workload\.yaml: mlperf_benchmark 'nosuch' is not an MLPerf training"
                                          " benchmark mlperf_logging knows"):
        benchmarks.ruleset_of(workload.model_copy(update={"mlperf_benchmark": "nosuch", "ruleset": None}))
    with pytest.raises(UsageError, match="--ruleset 9.9.9: mlperf-logging knows training rulesets 1.0.0, "):
        benchmarks.check_ruleset("9.9.9", "unet3d")
