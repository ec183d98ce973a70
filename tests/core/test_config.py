import re
from pathlib import Path

import pytest

from orchestrator.config.locations import default_seeds_file, workloads_dir
from orchestrator.config.profiles import load_profiles
from orchestrator.config.workloads import Registry
from orchestrator.errors import ConfigError
from orchestrator.session.plan import profile_for

GOOD = """
default_profile: qualify
workloads:
  w:
    qualify: {seeds: "1-9", drop_per_end: 1, max_non_converged: 1}
"""


def test_project_profiles_load_and_follow_the_scoring_rules():
    profiles = load_profiles(default_seeds_file())
    workloads = Registry([workloads_dir()])
    mlperf = profile_for(workloads.get("unet3d"), profiles, "mlperf")
    assert (mlperf.runs, mlperf.drop_per_end, mlperf.max_non_converged, str(mlperf.seeds)) == (40, 4, 4, "random:40")
    resnet = profile_for(workloads.get("resnet50"), profiles, "mlperf")
    assert (resnet.runs, resnet.drop_per_end, resnet.max_non_converged, str(resnet.seeds)) == (5, 1, 1, "random:5")
    assert profiles.get("unet3d", "mlperf").runs is None  # seeds.yaml does not repeat MLPerf's rule
    assert profiles.get("unet3d", None).name == "qualify"
    assert profiles.get("unet3d", "smoke").dataset.source == "synthetic"


def test_the_mlperf_profile_takes_its_runs_and_drops_from_the_rules_and_keeps_named_seeds(tmp_path: Path):
    path = tmp_path / "seeds.yaml"
    path.write_text("workloads:\n  w:\n    mlperf: {seeds: '1-40', timeout_minutes: 5}\n")
    workload = Registry([workloads_dir()]).get("unet3d").model_copy(update={"name": "w"})
    mlperf = profile_for(workload, load_profiles(path), "mlperf")
    assert (mlperf.runs, mlperf.drop_per_end, str(mlperf.seeds), mlperf.timeout_minutes) == (40, 4, "1-40", 5)
    path.write_text("workloads:\n  w:\n    mlperf: {runs: 40, drop_per_end: 4}\n")
    with pytest.raises(ConfigError, match=r"workloads\.w\.mlperf.*runs, drop_per_end: the mlperf profile takes the"
                                          r" runs and drops from MLPerf's rules for the benchmark") as info:
        load_profiles(path)
    assert "\n" not in str(info.value)


def test_profile_knows_its_name(tmp_path: Path):
    path = tmp_path / "seeds.yaml"
    path.write_text(GOOD)
    assert load_profiles(path).get("w", "qualify").name == "qualify"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (GOOD.replace("drop_per_end: 1", "drop_per_end: -1"), "workloads.w.qualify.drop_per_end"),
        (GOOD.replace('seeds: "1-9"', 'seeds: "9-1"'), "workloads.w.qualify.seeds"),
        (GOOD.replace("max_non_converged: 1", "max_non_converged: 2"), "max_non_converged"),
        (GOOD.replace("qualify: {", "qualify: {colour: red, "), "workloads.w.qualify.colour"),
        (GOOD.replace("qualify:", "fast:"), "workloads.w.fast"),
        ("workloads: [1, 2", "cannot read"),
    ],
)
def test_invalid_files_name_the_field(tmp_path: Path, body: str, message: str):
    path = tmp_path / "seeds.yaml"
    path.write_text(body)
    with pytest.raises(ConfigError, match=message) as info:
        load_profiles(path)
    assert "\n" not in str(info.value)


def test_missing_workload_or_profile(tmp_path: Path):
    path = tmp_path / "seeds.yaml"
    path.write_text(GOOD)
    with pytest.raises(ConfigError, match="no profile 'smoke'"):
        load_profiles(path).get("w", "smoke")
    with pytest.raises(ConfigError, match="unknown profile"):
        load_profiles(path).get("w", "fast")
    with pytest.raises(ConfigError, match="not found"):
        load_profiles(tmp_path / "nope.yaml")


WORKLOAD = """name: w
mlperf_benchmark: llama2_70b_lora
ruleset: 4.1.0
run: [bash, run.sh]
quality: {metric: eval_accuracy, better: lower, target: 0.925, env: TARGET}
samples_per_epoch: 3901
data: {cli: [python3, dataset.py]}
"""


def test_a_workload_declares_its_benchmarks_facts(tmp_path: Path):
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / "workload.yaml").write_text(WORKLOAD)
    workload = Registry([tmp_path]).get("w")
    assert (workload.mlperf_benchmark, workload.ruleset) == ("llama2_70b_lora", "4.1.0")
    assert workload.samples_per_epoch == 3901
    assert (workload.quality.better, workload.quality.target) == ("lower", 0.925)


@pytest.mark.parametrize(("change", "message"), [
    (("ruleset: 4.1.0", "ruleset: four"), "ruleset: String should match pattern"),
    (("better: lower, ", ""), "quality.better: Field required"),
    (("better: lower", "better: down"), "quality.better: Input should be 'higher' or 'lower'"),
    (("target: 0.925", "target: .nan"), "quality.target"),
    (("samples_per_epoch: 3901", "samples_per_epoch: 0"), "samples_per_epoch: Input should be greater than 0"),
    (("data:", "olympic: {runs: 10, drop_per_end: 1}\ndata:"),
     "olympic: the runs and drops are MLPerf's rule for the benchmark, taken from orchestrator/mlperf/benchmarks.py"),
])
def test_a_wrong_workload_declaration_is_one_line_naming_the_field(tmp_path: Path, change, message):
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / "workload.yaml").write_text(WORKLOAD.replace(*change))
    with pytest.raises(ConfigError, match=re.escape(message)) as info:
        Registry([tmp_path]).get("w")
    assert "\n" not in str(info.value)
