"""Gates that must not be fooled (issue 36): a node is never judged by the suite's own settings (a
size of zero or less is refused before anything runs, exit 2; a size the host cannot allocate is
INCONCLUSIVE naming the setting); no number outside its check's sane range is a measurement; a
check's timeout holds from the probe's start; a missing Slurm is an infrastructure fault (exit 3)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from orchestrator.qualify.config import QUALIFY_FILE_ENV
from orchestrator.results.qualification import Status
from tests.qualify.nodes import STAND_IN_HEAD, FakeNvml, probe_source, run_node


def qualify_yaml(tmp_path: Path, suite: str, monkeypatch: pytest.MonkeyPatch | None = None, **top: str) -> Path:
    path = tmp_path / "qualify.yaml"
    extra = "".join(f"{key}: {value}\n" for key, value in top.items())
    path.write_text(f"workload: fakebench\n{extra}suites:\n  s:\n{suite}")
    if monkeypatch is not None:
        monkeypatch.setenv(QUALIFY_FILE_ENV, str(path))
    return path


@pytest.mark.parametrize(("suite", "words"), [
    ("    cpu: {gemm: {dense: [[0, 128, 128]]}}\n",
     "gemm: field dense.0.0: Input should be greater than or equal to 1"),
    ("    cpu: {gemm: {dense: [[-5, 128, 128]]}}\n",
     "gemm: field dense.0.0: Input should be greater than or equal to 1"),
    ("    cpu: {gemm: {sparse: [[512, 4, 256, 2.0]]}}\n",
     "gemm: field sparse.0.3: Input should be less than 1"),
    ("    cpu: {gemm: {sparse: [[512, 4, 256, .nan]]}}\n",
     "gemm: field sparse.0.3: Input should be a finite number"),
    ("    cpu: {conv: {conv2d: [[1, 8, 16, 8, 3, 1, -1]]}}\n",
     "conv: field conv2d.0.6: Input should be greater than or equal to 0"),
    ("    cpu: {conv: {conv3d: [[1, 4, 8, 8, 0, 1, 1]]}}\n",
     "conv: field conv3d.0.4: Input should be greater than or equal to 1"),
    ("    cpu: {gemm: {dense: [[8, 8, 8]], timeout_minutes: 1e308}}\n",
     "gemm: field timeout_minutes: Input should be less than or equal to 10080"),
    ("    probe_timeout_minutes: 1e308\n    cpu: {gemm: {dense: [[8, 8, 8]]}}\n",
     "probe_timeout_minutes: Input should be less than or equal to 10080"),
    ("    cpu: {throughput: {timeout_minutes: 1e308}}\n",
     "throughput: field timeout_minutes: Input should be less than or equal to 10080"),
    ("    time_to_train: {profile: smoke, seed: -1}\n",
     "time_to_train: Value error, field seed: Input should be greater than or equal to 0"),
])
def test_settings_no_node_can_run_are_refused_before_anything_runs(cli, tmp_path: Path, monkeypatch, suite, words):
    """They FAILed the node (exit 1, `replace`): a GEMM of 0 or -5 rows, a sparsity of 2.0 (PASS at "0
    GFLOP/s"), a timeout of 1e308 minutes (x60: infinity, never)."""
    path = qualify_yaml(tmp_path, suite, monkeypatch)
    r = cli("qualify", "--suite", "s", "--results", str(tmp_path / "r"), "--node-name", "n1")
    assert r.code == 2 and r.out == "" and len(r.err.strip().splitlines()) == 1, r.err
    err = " ".join(r.err.split())
    assert f"{path}: invalid field suites.s." in err and words in err, err
    assert not (tmp_path / "r").exists()


def test_a_timeout_of_1e308_minutes_is_refused_for_the_fleet_too(cli, tmp_path: Path, monkeypatch):
    qualify_yaml(tmp_path, "    cpu: {gemm: {dense: [[8, 8, 8]]}}\n", monkeypatch, fleet="{timeout_minutes: 1e308}")
    r = cli("qualify", "--suite", "s", "--results", str(tmp_path / "r"), "--node-name", "n1")
    assert r.code == 2 and "fleet.timeout_minutes: Input should be less than or equal to 10080" in r.err, r.err


@pytest.mark.parametrize(("suite", "metric", "setting"), [
    ("    cpu: {memory: {host_mb: 10000000}}\n", "host_copy_GBps", "qualify.yaml cpu.memory {host_mb: 10000000}"),
    ("    cpu: {sdc: {size: 100000, width: 16}}\n", "sdc_gemm_ms", "qualify.yaml cpu.sdc {size: 100000, width: 16}"),
])
def test_a_size_the_host_cannot_allocate_is_inconclusive_naming_the_setting(mltrain_env, tmp_path: Path, suite: str,
                                                                           metric: str, setting: str):
    """A 10 TB copy, a 100000^2 GEMM: "host out of memory", which FAILed the node (`replace`); the suite's
    sizes say nothing about the node."""
    config = qualify_yaml(tmp_path, suite)
    record = run_node(tmp_path / "r", nvml=FakeNvml(missing_library=True), config=config, suite="s")
    check = next(c for c in record.checks if c.name in ("memory", "sdc"))
    assert check.status is Status.INCONCLUSIVE and record.verdict is Status.INCONCLUSIVE, check.reasons
    assert not record.remediation and not check.remediation
    reason = check.reasons[0]
    assert reason.startswith(f"{metric}: host out of memory: ") and setting in reason, reason
    assert "batch" not in reason and "data-loader" not in reason  # a training seed's advice, not the suite's
    assert "the suite's sizes ask more memory than this node can allocate" in reason
    assert "this says nothing about the node" in reason


@pytest.mark.timeout(90)
def test_a_probe_hung_before_it_says_its_device_is_stopped_at_its_first_checks_timeout(mltrain_env, tmp_path: Path):
    """Under a 6 s timeout a probe hung at its start (torch's import, CUDA's) ran to an undocumented 300 s."""
    gemm = "gemm: {dense: [[8, 8, 8]], timeout_minutes: 0.1}"
    config = qualify_yaml(tmp_path, f"    cpu: {{{gemm}, memory: {{host_mb: 1}}}}\n    cuda: {{{gemm}}}\n")
    started = time.monotonic()
    record = run_node(tmp_path / "r", probe=STAND_IN_HEAD + "time.sleep(3600)\n", config=config, suite="s",
                      nvml=FakeNvml(missing_library=True))
    assert time.monotonic() - started < 60
    for name in ("gemm", "memory"):
        check = record.check(name)
        assert check.status is Status.INCONCLUSIVE, check
        assert check.reasons == ("the probe did not say what it runs on within 6 s (gemm's timeout; the probe's"
                                 " start counts in it): stopped",), check.reasons
    assert record.verdict is Status.INCONCLUSIVE


@pytest.mark.parametrize(("value", "words"), [
    (0.0, "gemm_fp32_256x256x256 0 TFLOP/s is no measurement: a gemm number is above 0 and at most 100000"),
    (-3.0, "gemm_fp32_256x256x256 -3 TFLOP/s is no measurement"),
    (1e9, "gemm_fp32_256x256x256 1e+09 TFLOP/s is no measurement"),
])
def test_a_probe_number_outside_its_sane_range_is_no_measurement(mltrain_env, tmp_path: Path, value: float,
                                                                 words: str):
    """A sparse GEMM of sparsity 2.0 PASSed at "0 GFLOP/s": each number's sign and range are declared with
    its check (``sane``); outside them it is dropped, named, and its check is INCONCLUSIVE."""
    record = run_node(tmp_path / "r", probe=probe_source({"gemm_fp32_256x256x256": value,
                                                          "gemm_fp32_512x512x512": 5.0}))
    gemm = record.check("gemm")
    assert gemm.status is Status.INCONCLUSIVE and record.verdict is not Status.PASS, gemm.reasons
    assert any(reason.startswith(words) for reason in gemm.reasons), gemm.reasons
    assert [m.metric for m in gemm.measurements] == ["gemm_fp32_512x512x512"]  # the sane one is kept


def test_every_number_a_check_declares_has_a_sane_range():
    """One rule per number, declared with its check once: every unit's metric has its range."""
    from orchestrator.qualify.catalog import default_registry

    for declaration in default_registry().declarations:
        for metric in declaration.units:  # a metric of each unit's glob is in a range's
            assert "declares no sane range" not in declaration.insane(metric.replace("*", "x"), 1.0), metric
        for above, at_most in declaration.sane.values():
            assert above < at_most, declaration.name


def test_qualify_on_slurm_without_slurm_is_an_infrastructure_fault(cli, tmp_path: Path, monkeypatch):
    """It was exit 2 (bad input): a missing tool is the infrastructure's, exit 3, as `infer` has it."""
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    r = cli("qualify", "--runner", "slurm", "--results", str(tmp_path / "r"))
    assert r.code == 3 and r.err.strip() == "error: sinfo not found: is this a Slurm login node?", r.err
    assert not (tmp_path / "r").exists()


def test_the_suites_own_settings_fit_their_bounds():
    """The shipped qualify.yaml loads (its sizes within the probe's declared bounds)."""
    from orchestrator.config.locations import python_root
    from orchestrator.qualify.catalog import default_registry
    from orchestrator.qualify.config import load_config

    loaded = load_config(python_root() / "qualify.yaml", default_registry())
    assert json.dumps(loaded.suite("quick").cpu.settings("gemm").model_dump(mode="json"))
