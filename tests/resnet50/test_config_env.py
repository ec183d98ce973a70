"""The environment's knobs of resnet50 (workloads/resnet50/config.py), passed through untouched by
run_and_time.sh and throughput.sh."""

from __future__ import annotations

import pytest

from workloads.common.errors import SettingsError
from workloads.resnet50.config import Environment, env_assignments, env_count, preset_from


def test_the_preset_follows_the_profile_unless_named():
    assert preset_from({}) == "closed"
    assert preset_from({"MLTRAIN_PROFILE": "smoke"}) == "smoke"
    assert preset_from({"MLTRAIN_PROFILE": "smoke", "RESNET50_PRESET": "closed"}) == "closed"


def test_assignments_in_the_order_they_apply():
    env = {"RESNET50_SET": " workers=4  precision=fp16 ", "RESNET50_PLATFORM": "box", "THREADS": "2"}
    assert env_assignments(env) == ["workers=4", "precision=fp16", "submission_platform=box", "threads=2"]
    assert env_assignments({}) == []


def test_step_counts_default_and_reject_what_is_not_a_count():
    assert (env_count({}, "STEPS"), env_count({"WARMUP_STEPS": ""}, "WARMUP_STEPS")) == (20, 5)
    assert env_count({"STEPS": " 3 "}, "STEPS") == 3
    for bad in ("many", "-1", "2.5"):
        with pytest.raises(SettingsError, match="STEPS must be a non-negative integer"):
            env_count({"STEPS": bad}, "STEPS")


def test_the_division_the_caller_asks_for():
    assert Environment.read({"SUBMISSION_DIVISION": "open", "MLTRAIN_SEEDS_RANDOM": "1"}) == Environment(
        seeds_random=True, force_open=True)
    assert Environment.read({}) == Environment()
    with pytest.raises(SettingsError, match="SUBMISSION_DIVISION must be open or closed"):
        Environment.read({"SUBMISSION_DIVISION": "maybe"})
