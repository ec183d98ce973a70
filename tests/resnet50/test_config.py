from __future__ import annotations

import json
from pathlib import Path

import mlperf_logging
import pytest
import yaml

from workloads.common.errors import SettingsError
from workloads.resnet50 import rcp
from workloads.resnet50.config import build, closed, smoke, with_overrides
from workloads.resnet50.mlperf_log import optimizer_keys
from workloads.resnet50.train import block_length, schedule_for

RULES = Path(mlperf_logging.__file__).parent / "compliance_checker"


def test_closed_preset_is_the_reference_convergence_point_for_batch_3264():
    config = closed()
    assert (config.optimizer, config.base_lr, config.warmup_epochs, config.momentum) == ("lars", 10.5, 2.0, 0.9)
    assert (config.weight_decay, config.end_lr, config.poly_power, config.lars_epsilon) == (5e-5, 0.0001, 2.0, 0.0)
    assert (config.label_smoothing, config.eval_every, config.target, config.crop) == (0.1, 4, 0.759, 224)
    # mlperf_logging's rcps_resnet.json, resnet_ref_3264: opt_learning_rate_decay_steps 14523
    assert schedule_for(config, 1_281_167, 8 * config.batch_size).decay_steps == 14523


def test_evaluation_every_four_epochs_with_an_offset():
    every_4 = [e for e in range(1, 13) if with_overrides(closed(), ["eval_offset=0"]).is_eval_epoch(e)]
    offset_2 = [e for e in range(1, 13) if with_overrides(closed(), ["eval_offset=2"]).is_eval_epoch(e)]
    assert (every_4, offset_2) == ([4, 8, 12], [2, 6, 10])
    config = with_overrides(closed(), ["eval_offset=2", "max_epochs=7"])
    assert [block_length(config, first) for first in (1, 3, 7)] == [2, 4, 1]


def test_overrides_parse_by_field_type_and_name_bad_input():
    config = with_overrides(smoke(), ["batch_size=8", "base_lr=0.5", "channels_last=false", "layers=1,2,1,1",
                                      "precision=bf16", "threads=auto"])
    assert (config.batch_size, config.base_lr, config.channels_last, config.layers, config.precision) == (
        8, 0.5, False, (1, 2, 1, 1), "bf16")
    assert config.threads == 0 and with_overrides(config, ["threads=3"]).threads == 3
    for bad, fragment in [("batch=3", "unknown setting"), ("batch_size=x", "batch_size"),
                          ("channels_last=maybe", "channels_last"), ("eval_offset=4", "eval_offset"),
                          ("optimizer=adam", "optimizer"), ("precision=fp8", "precision"), ("decode=gpu", "decode"),
                          ("threads=-1", "threads")]:
        with pytest.raises(SettingsError, match=fragment):
            with_overrides(closed(), [bad])


@pytest.mark.parametrize(("processes", "per_process", "global_batch", "base_lr", "decay_steps"), [
    (8, 408, 3264, 10.5, 14523),
    (4, 408, 1632, 7.4, 27476),
    (8, 512, 4096, 10.0, 13137),
    (16, 512, 8192, 17.0, 6095),
])
def test_closed_preset_follows_the_rcp_of_the_global_batch_it_runs_with(processes, per_process, global_batch,
                                                                         base_lr, decay_steps):
    config = build("closed", processes, [f"batch_size={per_process}"] if per_process != 408 else [])
    assert config.batch_size * processes == global_batch and config.base_lr == base_lr
    assert schedule_for(config, 1_281_167, global_batch).decay_steps == decay_steps


def test_closed_preset_on_one_process_takes_the_nearest_point_and_overrides_still_win():
    config = build("closed", 1, [])
    assert (config.batch_size, config.base_lr, config.warmup_epochs) == (408, 7.4, 2.0)  # 1632 is nearest to 408
    assert build("closed", 1, ["base_lr=3.0"]).base_lr == 3.0
    with pytest.raises(SettingsError, match="unknown preset"):
        build("fast", 1, [])


def _required_keys(rule_file: str) -> set[str]:
    rules = yaml.safe_load((RULES / rule_file).read_text())
    return {rule["KEY"]["NAME"] for rule in rules if "KEY" in rule and rule["KEY"].get("REQ")}


@pytest.mark.parametrize("optimizer", ["lars", "sgd"])
def test_logged_optimizer_keys_cover_what_the_checker_requires(optimizer):
    logged = set(optimizer_keys(optimizer=optimizer, base_lr=1.0, end_lr=0.0001, power=2.0, decay_steps=10,
                                warmup_epochs=1.0, momentum=0.9, weight_decay=5e-5, lars_epsilon=0.0))
    required = _required_keys(f"training_3.1.0/closed_resnet_{optimizer}.yaml") - {"model_bn_span"}
    assert required <= logged


def test_rcp_table_is_the_one_mlperf_logging_ships():
    shipped = json.loads((Path(mlperf_logging.__file__).parent / "rcp_checker" / "training_4.0.0" /
                          "rcps_resnet.json").read_text())
    ours = {point.global_batch: point for point in rcp.POINTS}
    assert sorted(ours) == sorted(record["BS"] for record in shipped.values())
    for record in shipped.values():
        point, hyper = ours[record["BS"]], record["Hyperparams"]
        assert hyper["optimizer"] == "lars"
        assert (point.base_lr, point.warmup_epochs, point.momentum, point.weight_decay, point.decay_steps,
                point.bn_span) == (hyper["opt_base_learning_rate"], hyper["opt_learning_rate_warmup_epochs"],
                                   hyper["opt_momentum"], hyper["opt_weight_decay"],
                                   hyper["opt_learning_rate_decay_steps"], hyper["model_bn_span"])
        assert round(point.decay_epochs * rcp.IMAGENET_TRAIN_IMAGES / point.global_batch) == point.decay_steps
        assert (hyper.get("opt_end_learning_rate", 0.0001), hyper.get("epsilon", 0)) == (0.0001, 0)
