from __future__ import annotations

from pathlib import Path

import mlperf_logging
import pytest
import yaml

from workloads.resnet50.config import closed, smoke, with_overrides
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
                                      "amp=bf16"])
    assert (config.batch_size, config.base_lr, config.channels_last, config.layers, config.amp) == (
        8, 0.5, False, (1, 2, 1, 1), "bf16")
    for bad, fragment in [("batch=3", "unknown setting"), ("batch_size=x", "batch_size"),
                          ("channels_last=maybe", "channels_last"), ("eval_offset=4", "eval_offset"),
                          ("optimizer=adam", "optimizer")]:
        with pytest.raises(ValueError, match=fragment):
            with_overrides(closed(), [bad])


def _required_keys(rule_file: str) -> set[str]:
    rules = yaml.safe_load((RULES / rule_file).read_text())
    return {rule["KEY"]["NAME"] for rule in rules if "KEY" in rule and rule["KEY"].get("REQ")}


@pytest.mark.parametrize("optimizer", ["lars", "sgd"])
def test_logged_optimizer_keys_cover_what_the_checker_requires(optimizer):
    logged = set(optimizer_keys(optimizer=optimizer, base_lr=1.0, end_lr=0.0001, power=2.0, decay_steps=10,
                                warmup_epochs=1.0, momentum=0.9, weight_decay=5e-5, lars_epsilon=0.0))
    required = _required_keys(f"training_3.1.0/closed_resnet_{optimizer}.yaml") - {"model_bn_span"}
    assert required <= logged
