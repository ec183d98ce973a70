"""A profile's `real_data` env reaches the seeds only on real data, never in the mlperf profile; the
workload's `cuts` event reaches the record, the summary and the printed score (issue 22)."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.config.locations import default_seeds_file, workloads_dir
from orchestrator.config.profiles import load_profiles
from orchestrator.config.seedspec import SeedSpec
from orchestrator.config.workloads import Registry
from orchestrator.errors import ConfigError
from orchestrator.mlperf.mllog import build_record, parse_lines
from orchestrator.session.plan import plan_new

MLPERF_UNET3D_ENV = {"MLTRAIN_PROFILE": "mlperf", "QUALITY_THRESHOLD": "0.908"}
"""What an mlperf unet3d seed (seed 1, named) was told before real_data existed: it must stay exactly this."""


def _plan(profile: str, data: Path | None):
    profiles = load_profiles(default_seeds_file())
    workload = Registry([workloads_dir()]).get("unet3d")
    return plan_new(workload, profiles, seeds=SeedSpec.parse("1"), profile=profile, data=data, label=None)


def test_smoke_on_real_data_gets_the_cuts_and_on_synthetic_data_does_not(tmp_path: Path):
    real = _plan("smoke", tmp_path).seed_env()
    synthetic = _plan("smoke", None).seed_env()
    assert real["EVAL_CASES"] == "2" and real["EVAL_CROP"] == "48,96,96" and real["TRAIN_CASES"] == "8"
    assert real["EVALUATE_EVERY"] == "4" and synthetic["EVALUATE_EVERY"] == "1"
    assert not {"EVAL_CASES", "EVAL_CROP", "TRAIN_CASES"} & synthetic.keys()


def test_the_mlperf_profile_env_is_unchanged_and_refuses_real_data(tmp_path: Path):
    assert _plan("mlperf", tmp_path).seed_env() == MLPERF_UNET3D_ENV
    path = tmp_path / "seeds.yaml"
    path.write_text("workloads: {w: {mlperf: {real_data: {env: {EVAL_CASES: '1'}}}}}\n")
    with pytest.raises(ConfigError, match="real_data: the mlperf profile runs the benchmark on its whole data"):
        load_profiles(path)


def test_the_cut_reaches_the_record_and_the_score_lines():
    from mlperf_logging.mllog import constants as C

    from orchestrator.mlperf.quality import Goal
    from orchestrator.mlperf.scoring import score_runs
    from orchestrator.render.tables import score_lines
    from orchestrator.results.records import Summary

    text = "evaluated 2 of 42 cases, cropped to at most 48x96x96 around a kidney; trained on 8 of 168 cases"
    lines = [':::MLLOG {"namespace": "", "time_ms": 1, "event_type": "INTERVAL_START", "key": "run_start", '
             '"value": null, "metadata": {}}',
             ':::MLLOG {"namespace": "", "time_ms": 2, "event_type": "POINT_IN_TIME", "key": "cuts", '
             f'"value": {{"eval_cases": 2, "text": "{text}"}}, "metadata": {{}}}}']
    goal = Goal(target=0.7, metric=C.EVAL_ACCURACY)
    record = build_record(parse_lines(lines), goal=goal)
    assert record.cuts == text
    assert build_record(parse_lines(lines[:1]), goal=goal).cuts is None
    score = score_runs({1: record}, _plan("smoke", None).rule)
    summary = Summary(**score.model_dump(), run_id="r", workload="unet3d", profile="smoke", cuts=(text,))
    assert f"smoke profile on cut data: {text}" in score_lines(summary, score)
