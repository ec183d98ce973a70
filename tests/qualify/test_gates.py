"""Gates that must not be fooled (issue 30): a qualification that measured nothing is INCONCLUSIVE,
never PASS; the operator's references and qualify.yaml are refused, in one line naming the fault,
when they hold what would silently judge wrong (a key given twice, an infinity, a model listed
twice), and references that match nothing are named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.errors import EXIT_INFRASTRUCTURE
from orchestrator.qualify.config import QUALIFY_FILE_ENV
from tests.conftest import TEST_WORKLOADS


def qualify_yaml(tmp_path: Path, text: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "qualify.yaml"
    path.write_text(text)
    monkeypatch.setenv(QUALIFY_FILE_ENV, str(path))
    return path


def test_a_key_given_twice_in_qualify_yaml_is_refused_naming_it_and_its_lines(cli, tmp_path: Path, monkeypatch):
    """PyYAML keeps the last of two equal keys: a second `suites:` would replace every suite unsaid."""
    text = (TEST_WORKLOADS / "qualify.yaml").read_text() + "suites:\n  quick: {cpu: {}}\n"
    path = qualify_yaml(tmp_path, text, monkeypatch)
    first = text.splitlines().index("suites:") + 1
    r = cli("qualify", "--results", str(tmp_path / "r"), "--node-name", "n1")
    assert r.code == 2 and r.out == "" and len(r.err.strip().splitlines()) == 1, r.err
    assert (f"{path}: key 'suites' is given twice in one mapping (lines {first} and {len(text.splitlines()) - 1}):"
            " only one would be kept; remove or rename one") in " ".join(r.err.split())
    assert not (tmp_path / "r").exists()


def test_keys_a_merge_brings_in_may_be_overridden(tmp_path: Path):
    from orchestrator.qualify.catalog import default_registry
    from orchestrator.qualify.config import load_config

    path = tmp_path / "qualify.yaml"
    path.write_text("workload: fakebench\nx-cpu: &cpu {gemm: {dense: [[8, 8, 8]]}, memory: {host_mb: 8}}\n"
                    "suites:\n  quick:\n    cpu: {<<: *cpu, memory: {host_mb: 4}}\n")
    cpu = load_config(path, default_registry()).suite("quick").cpu
    assert cpu.settings("memory").host_mb == 4 and cpu.settings("gemm").dense == ((8, 8, 8),)


def test_a_metric_given_twice_in_the_references_is_refused(cli, tmp_path: Path):
    refs = tmp_path / "refs.yaml"
    refs.write_text("systems:\n  - model: '*'\n    source: acceptance runs\n    references:\n"
                    "      gemm_fp32_256x256x256: [1.0, -0.1, null, TFLOP/s]\n"
                    "      gemm_fp32_256x256x256: [9.0, -0.1, null, TFLOP/s]\n")
    r = cli("qualify", "--results", str(tmp_path / "r"), "--references", str(refs))
    assert r.code == 2 and "key 'gemm_fp32_256x256x256' is given twice in one mapping (lines 5 and 6)" in r.err
    assert not (tmp_path / "r" / "qualify").exists()


@pytest.mark.parametrize(("entry", "where"), [
    ("[.inf, -0.1, null, TFLOP/s]", "references.gemm_fp32_256x256x256.0"),   # +inf: would FAIL every node
    ("[1.0, -.inf, null, TFLOP/s]", "references.gemm_fp32_256x256x256.1"),   # -inf: would pass every number
    ("[.nan, -0.1, null, TFLOP/s]", "references.gemm_fp32_256x256x256.0"),
    ("[1.0, -0.1, .inf, TFLOP/s]", "references.gemm_fp32_256x256x256.2"),
])
def test_infinities_and_nan_in_the_references_are_refused(cli, tmp_path: Path, entry: str, where: str):
    refs = tmp_path / "refs.yaml"
    refs.write_text(f"systems:\n  - {{model: '*', source: runs, references: {{gemm_fp32_256x256x256: {entry}}}}}\n")
    r = cli("qualify", "--results", str(tmp_path / "r"), "--references", str(refs))
    assert r.code == 2 and f"invalid field systems.0.{where}: Input should be a finite number" in r.err, r.err
    assert not (tmp_path / "r" / "qualify").exists()


def test_a_model_listed_twice_in_the_references_is_refused(cli, tmp_path: Path):
    refs = tmp_path / "refs.yaml"
    refs.write_text("systems:\n  - {model: '*', source: runs, references: {m1: [1, -0.1, null, x]}}\n"
                    "  - {model: '*', source: other runs, references: {m2: [1, -0.1, null, x]}}\n")
    r = cli("qualify", "--results", str(tmp_path / "r"), "--references", str(refs))
    assert r.code == 2 and "model '*' is listed twice: merge its references into one entry" in r.err, r.err


@pytest.mark.parametrize(("workload", "suite", "words"), [
    ("fakebench", "{}", "nothing was measured: every check was not applicable (gpu_health: no GPU on this host"),
    ("fakebench", "{cpu: {nccl: {}}}", "nccl: nccl needs a CUDA device; this is a CPU"),
    ("lossbench", "{cpu: {throughput: {steps: 3}}}", "throughput: workload lossbench declares no throughput mode"),
])
def test_a_qualification_that_measured_nothing_is_inconclusive_never_pass(cli, tmp_path: Path, monkeypatch,
                                                                          workload: str, suite: str, words: str):
    """An empty suite, every check not applicable, a workload without a throughput mode: exit 3."""
    qualify_yaml(tmp_path, f"workload: {workload}\nsuites:\n  nothing: {suite}\n", monkeypatch)
    r = cli("qualify", "--suite", "nothing", "--results", str(tmp_path / "r"), "--node-name", "n1", "--json")
    record = json.loads(r.out)
    assert r.code == EXIT_INFRASTRUCTURE and record["verdict"] == "inconclusive", r.err
    assert record["reasons"][0].startswith("nothing was measured: every check was not applicable (")
    assert words in record["reasons"][0]


def test_an_unknown_inference_model_in_qualify_yaml_is_refused_when_it_is_loaded(cli, tmp_path: Path, monkeypatch):
    """Found at load (exit 2, nothing run), not while qualifying (INCONCLUSIVE, exit 3, on every node)."""
    path = qualify_yaml(tmp_path, "workload: fakebench\nsuites:\n  quick: {cpu: {gemm: {dense: [[8, 8, 8]]}}}\n"
                                  "  full: {cpu: {inference: {model: resnet5O}}}\n", monkeypatch)
    r = cli("qualify", "--suite", "quick", "--results", str(tmp_path / "r"), "--node-name", "n1")
    assert r.code == 2 and r.out == "" and len(r.err.strip().splitlines()) == 1, r.err
    assert f"{path}: suites.full.cpu.inference: unknown inference model 'resnet5O': known models are" in r.err
    assert "resnet50" in r.err and not (tmp_path / "r").exists()


def test_references_that_match_nothing_are_named_in_a_warning(cli, tmp_path: Path):
    """A metric no check measures, one in another unit than its check's, a model no node here is: each
    named (they judge nothing); the references that match still judge."""
    refs = tmp_path / "refs.yaml"
    refs.write_text("systems:\n"
                    "  - model: '*'\n    source: acceptance runs\n    references:\n"
                    "      gemm_fp32_256x256x256: [0.000001, -0.5, null, TFLOP/s]\n"
                    "      gemm_fp32_256x256x256_gpu3: [0.000001, -0.5, null, TFLOP/s]\n"
                    "      gemm_fp33_256x256x256: [1.0, -0.1, null, TFLOP/s]\n"
                    "      throughput_samples_per_s: [1.0, -0.1, null, GB/s]\n"
                    "  - model: NVIDIA H100 80GB HBM3\n    source: the H100 nodes' acceptance\n    references:\n"
                    "      gemm_fp32_256x256x256: [900.0, -0.1, null, TFLOP/s]\n")
    r = cli("qualify", "--results", str(tmp_path / "r"), "--references", str(refs), "--node-name", "n1", "--json")
    assert r.code == 4 and json.loads(r.out)["verdict"] == "warn", r.err  # the judge says so again: not judged
    err = " ".join(r.err.split())
    assert "warning: refs.yaml (*): no check measures 'gemm_fp33_256x256x256': its reference judges nothing" in err
    assert ("warning: refs.yaml (*): throughput_samples_per_s is in GB/s, but throughput measures it in samples/s:"
            " its reference judges nothing") in err
    assert "warning: refs.yaml: no node qualified here is a 'NVIDIA H100 80GB HBM3'" in err
    assert err.count("warning:") == 3  # the per-GPU name of a measured metric matches
    gemm = next(c for c in json.loads(r.out)["checks"] if c["name"] == "gemm")
    judged = next(m for m in gemm["measurements"] if m["metric"] == "gemm_fp32_256x256x256")
    assert judged["reference"]["kind"] == "operator" and judged["status"] == "pass"
