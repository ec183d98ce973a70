from pathlib import Path

import pytest

from orchestrator.config.locations import default_seeds_file
from orchestrator.config.profiles import load_profiles
from orchestrator.errors import ConfigError

GOOD = """
default_profile: qualify
workloads:
  w:
    qualify: {seeds: "1-9", drop_per_end: 1, max_non_converged: 1}
"""


def test_project_profiles_load_and_follow_the_scoring_rules():
    profiles = load_profiles(default_seeds_file())
    mlperf = profiles.get("unet3d", "mlperf")
    assert (mlperf.runs, mlperf.drop_per_end, mlperf.max_non_converged) == (40, 4, 4)
    assert profiles.get("resnet50", "mlperf").runs == 5
    assert profiles.get("unet3d", None).name == "qualify"
    assert profiles.get("unet3d", "smoke").dataset.source == "synthetic"


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
