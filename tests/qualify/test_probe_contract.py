"""The probe and the orchestrator agree on how it runs and what it prints: the probe is a module run
with the seed and its settings in the environment (no source in the environment any more); an unknown
check is one line and exit 2, in the probe's settings and in qualify.yaml; a probe of another
protocol is named, not half read; and sanity stays apart from performance through the verdict."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from orchestrator.qualify import judge, micro, probe_lines
from orchestrator.qualify.catalog import default_registry
from orchestrator.qualify.config import QUALIFY_FILE_ENV, HistoryPolicy
from orchestrator.qualify.probe_lines import ProbeRun
from orchestrator.qualify.references import References
from orchestrator.results.qualification import Reference, Status
from orchestrator.results.records import Exit
from orchestrator.runners.outcome import JobOutcome
from tests.conftest import PROJECT, TEST_WORKLOADS
from tests.qualify.nodes import probe_of, suite_of
from workloads.common.probe import protocol, registry, settings

SUITE = suite_of(cpu={"gemm": {"dense": [[256, 256, 256], [512, 512, 512]]}})
CHECKS = default_registry()


def probe(*args: str, config: dict | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(PROJECT), settings.CONFIG_ENV: json.dumps(config or {})}
    return subprocess.run([sys.executable, "-m", "workloads.common.probe", *args], cwd=PROJECT, env=env,
                          capture_output=True, text=True, timeout=120)


def test_an_unknown_check_in_the_probes_settings_is_one_line_and_exit_2():
    r = probe("1", config={"order": ["gemm", "fft"]})
    assert r.returncode == 2 and r.stdout == ""
    checks = ", ".join(registry.CHECKS)
    assert r.stderr == f"error: probe settings: unknown check 'fft': the probe's checks are {checks}\n"
    bad_seed = probe("one")
    assert bad_seed.returncode == 2
    assert bad_seed.stderr == "error: probe settings: the seed must be an integer, got 'one'\n"


def test_an_unknown_check_in_qualify_yaml_is_one_line_and_exit_2(cli, tmp_path: Path, monkeypatch):
    config = tmp_path / "qualify.yaml"
    config.write_text((TEST_WORKLOADS / "qualify.yaml").read_text() + "probe: {checks: [gemm, fft]}\n")
    monkeypatch.setenv(QUALIFY_FILE_ENV, str(config))
    r = cli("qualify", "--results", str(tmp_path / "r"), "--node-name", "n1")
    assert r.code == 2 and r.out == ""
    assert len(r.err.strip().splitlines()) == 1 and "unknown check 'fft'" in r.err, r.err
    assert not (tmp_path / "r").exists()  # refused before anything ran


def test_the_orchestrator_speaks_the_probes_protocol_and_settings():
    assert (probe_lines.PREFIX, probe_lines.PROTOCOL) == (protocol.PREFIX, protocol.PROTOCOL)
    assert micro.CONFIG_ENV == settings.CONFIG_ENV
    assert probe_of().checks == CHECKS.probe and probe_of().command == ("python", "-m",
                                                                                  "workloads.common.probe")
    assert set(registry.CHECKS) == {*CHECKS.probe, *CHECKS.fleet}  # every registered check: a node's or a fleet's
    probe = [d for d in CHECKS.declarations if d.runs == "probe"]
    parsed = settings.parse(json.dumps(micro.probe_config(SUITE, probe)))
    assert parsed.order == CHECKS.probe and parsed.seconds_per_case == SUITE.probe_seconds_per_case
    assert parsed.specs("cpu") == {"gemm": {"dtypes": ["fp32"], "dense": [[256, 256, 256], [512, 512, 512]],
                                            "sparse": []}}
    assert parsed.specs("cuda") == {}


def finished(tmp_path: Path, *lines: str) -> ProbeRun:
    run = ProbeRun(outcome=JobOutcome(job_id="pid:1", exit=Exit(code=0), log=tmp_path / "out",
                                        timed_out=False, lost="", seconds=1.0))
    for line in lines:
        run.observe(line)
    return run


def test_a_probe_of_another_protocol_could_not_run(tmp_path: Path):
    """A probe of protocol 1 (an image built before the probe was a package) is an ERROR that says so."""
    run = finished(tmp_path, protocol.line("device", device="cpu"),
                   protocol.line("result", check="gemm", metric="gemm_fp32_256x256x256", value=1.0, unit="TFLOP/s",
                                 sane=True, detail="protocol 1"),
                   protocol.line("timing", check="gemm", seconds=1.0))
    (gemm,) = micro.probe_checks(run, SUITE, CHECKS)
    assert gemm.status is Status.INCONCLUSIVE and not gemm.measurements
    assert gemm.reason.startswith("the probe speaks protocol 1, this mltrain reads protocol 2")


def result(metric: str, value: float, passed: bool) -> str:
    return protocol.line("result", check="gemm", metric=metric,
                         sanity={"passed": passed, "detail": "max relative error 0.3" if not passed else "ok"},
                         performance={"value": value, "unit": "TFLOP/s", "better": "higher", "detail": "timed"})


def test_a_wrong_result_fails_whatever_its_speed_and_a_slow_right_one_is_judged(tmp_path: Path):
    run = finished(tmp_path, protocol.line("device", protocol=2, device="cpu"),
                   result("gemm_fp32_256x256x256", 1000.0, passed=False), result("gemm_fp32_512x512x512", 1.0, True),
                   protocol.line("timing", check="gemm", seconds=1.0))
    (gemm,) = micro.probe_checks(run, SUITE, CHECKS)
    assert gemm.sanity is Status.FAIL and gemm.sanity_reasons == (
        "gemm_fp32_256x256x256: wrong result (max relative error 0.3)",)
    assert [m.metric for m in gemm.measurements] == ["gemm_fp32_512x512x512"]  # the fast wrong one is no number
    bound = {metric: Reference(value=10.0, lower=9.0, upper=None, unit="TFLOP/s", kind="operator", source="refs")
             for metric in ("gemm_fp32_256x256x256", "gemm_fp32_512x512x512")}
    judged = judge.judge_check(gemm, References(operator=bound), HistoryPolicy())
    assert judged.status is Status.FAIL and judged.sanity is Status.FAIL
    assert judged.reasons[0] == "gemm_fp32_256x256x256: wrong result (max relative error 0.3)"
    assert judged.reasons[1].startswith("gemm_fp32_512x512x512 1 TFLOP/s below the lower bound 9")

    right = finished(tmp_path, protocol.line("device", protocol=2, device="cpu"),
                     result("gemm_fp32_512x512x512", 1.0, True), protocol.line("timing", check="gemm", seconds=1.0))
    (slow,) = micro.probe_checks(right, SUITE, CHECKS)
    judged = judge.judge_check(slow, References(operator=bound), HistoryPolicy())
    assert judged.sanity is Status.PASS and judged.status is Status.FAIL  # right, but too slow: performance's verdict
    assert judged.reasons[0].startswith("gemm_fp32_512x512x512 1 TFLOP/s below the lower bound 9")
