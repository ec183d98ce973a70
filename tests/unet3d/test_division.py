"""Division labels: closed only with every value the rules fix and a random seed; open says why."""

from __future__ import annotations

from pathlib import Path

import pytest

from workloads.unet3d.config import TrainConfig
from workloads.unet3d.division import division
from workloads.unet3d.knobs import config_from_args
from workloads.unet3d.model import UNet3DConfig
from workloads.unet3d.split import Listing, case_name

KITS19 = frozenset(case_name(i) for i in range(210))
REFERENCE_DATA = Listing(images=KITS19, labels=KITS19, has_split_file=False)


def _config(**kw) -> TrainConfig:
    values = dict(data_dir=Path("."), results_dir=Path("."), seed=-1)
    values.update(kw)
    return TrainConfig(**values)


def test_reference_values_real_data_and_a_drawn_seed_are_closed():
    assert division(_config(), REFERENCE_DATA, 1) == ("closed", None)
    # tunable hyperparameters stay closed: batch, learning rates, warm-up, decay, momentum
    tuned = _config(batch_size=7, learning_rate=1.5, lr_warmup_epochs=100, lr_decay_epochs=(3000,), momentum=0.95)
    assert division(tuned, REFERENCE_DATA, 2) == ("closed", None)
    # the reference's own run_and_time.sh values: 1000 and 20 are the rules' for batch 2
    assert division(_config(start_eval_at=1000, evaluate_every=20), REFERENCE_DATA, 1) == ("closed", None)


def test_a_seed_from_a_random_caller_is_closed_a_fixed_one_is_not():
    assert division(_config(seed=17, seeds_random=True), REFERENCE_DATA, 1) == ("closed", None)
    assert division(_config(seed=17), REFERENCE_DATA, 1) == ("open", "seed fixed by the caller")


@pytest.mark.parametrize(
    "change, reason",
    [
        ({"model": UNet3DConfig(filters=(8, 16, 32))}, "FILTERS 8,16,32 differ from the reference 32,64,128,256,320"),
        ({"input_shape": (64, 64, 64), "val_input_shape": (64, 64, 64)}, "INPUT_SHAPE 64,64,64 differs"),
        ({"val_input_shape": (96, 96, 96)}, "VAL_INPUT_SHAPE 96,96,96 differs"),
        ({"overlap": 0.25}, "overlap 0.25 differs"),
        ({"oversampling": 0.5}, "OVERSAMPLING 0.5 differs"),
        ({"quality_threshold": 0.7}, "target 0.7 differs"),
        ({"start_eval_at": 4}, "START_EVAL_AT 4 differs from the rules' 1000"),
        ({"evaluate_every": 1}, "EVALUATE_EVERY 1 differs from the rules' 20"),
        ({"force_open": "SUBMISSION_DIVISION=open"}, "SUBMISSION_DIVISION=open asks for open"),
    ],
)
def test_each_fixed_value_changed_makes_it_open_with_the_reason(change, reason):
    label, why = division(_config(**change), REFERENCE_DATA, 1)
    assert label == "open" and reason in why


def test_the_evaluation_schedule_follows_samples_per_epoch():
    # batch 5: 165 samples per epoch -> the rules start at 1019 and evaluate every 21 epochs
    assert division(_config(batch_size=5, start_eval_at=1019, evaluate_every=21), REFERENCE_DATA, 1)[0] == "closed"
    assert division(_config(batch_size=5, start_eval_at=1000), REFERENCE_DATA, 1)[0] == "open"


@pytest.mark.parametrize(
    "listing, reason",
    [
        (Listing(images=frozenset(sorted(KITS19)[:40]), labels=frozenset(sorted(KITS19)[:40]), has_split_file=True),
         "the dataset has 40 cases and its own split.json"),
        (Listing(images=KITS19, labels=KITS19 - {"case_00007"}, has_split_file=False), "the dataset has 210 cases"),
        (Listing(images=KITS19, labels=KITS19, has_split_file=True), "its own split.json"),
    ],
)
def test_other_data_than_kits19_with_the_reference_split_is_open(listing, reason):
    label, why = division(_config(), listing, 1)
    assert label == "open" and reason in why


def test_every_reason_is_given_at_once():
    label, why = division(_config(seed=3, model=UNet3DConfig(filters=(8, 16, 32)), quality_threshold=0.7),
                          REFERENCE_DATA, 1)
    assert label == "open" and why.count("; ") == 2


@pytest.mark.parametrize(
    "env, forced",
    [({"SUBMISSION_DIVISION": "open"}, "SUBMISSION_DIVISION=open"), ({"MLTRAIN_PROFILE": "smoke"}, "the smoke profile"),
     ({"SUBMISSION_DIVISION": "closed"}, None), ({}, None)],
)
def test_the_environment_may_force_open_never_closed(env, forced):
    config = config_from_args(["--data-dir", ".", "--results-dir", "."], env)
    assert config.force_open == forced
    assert division(config, REFERENCE_DATA, 1)[0] == ("open" if forced else "closed")


def test_seeds_random_comes_from_the_orchestrator():
    config = config_from_args(["--data-dir", ".", "--results-dir", ".", "--seed", "4"], {"MLTRAIN_SEEDS_RANDOM": "1"})
    assert config.seeds_random and division(config, REFERENCE_DATA, 1) == ("closed", None)


def test_a_bad_division_value_is_an_error():
    with pytest.raises(ValueError, match="SUBMISSION_DIVISION"):
        config_from_args(["--data-dir", ".", "--results-dir", "."], {"SUBMISSION_DIVISION": "closd"})
