"""A model file `mltrain export RUN --model FILE` wrote runs wherever the run id does: `--profile
qualify --model FILE --data RAW` prepares the raw KiTS19 cases for the file's own window, and
`--profile smoke --model FILE` runs it on the smoke data; a window the model slides is read from the
file, while a model whose input is fixed by the rules (an image classifier) is still held to it."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.config.locations import workloads_dir
from orchestrator.errors import UsageError
from orchestrator.inference.plan import InferenceOptions, plan_inference
from tests.inference import tiny
from tests.inference.tiny_unet import exported_unet
from workloads.unet3d.export import export


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What `mltrain export` writes for a net trained on 32^3 patches."""
    return exported_unet(tmp_path_factory.mktemp("unet"), (32, 32, 32), "unet.onnx")


def test_qualify_takes_an_exported_file_and_prepares_the_data_for_its_window(exported: Path, tmp_path: Path):
    (tmp_path / "raw").mkdir()
    plan = plan_inference(InferenceOptions(model="3d-unet", scenario="Offline", profile="qualify",
                                           model_file=exported, data=tmp_path / "raw"), [workloads_dir()])
    assert plan.checked is not None and plan.checked.input_shape == ("batch_size", 1, 32, 32, 32)
    assert plan.sample_shape() == (1, 32, 32, 32)  # what the raw cases are prepared for


def test_smoke_takes_an_exported_file_without_data(exported: Path):
    plan = plan_inference(InferenceOptions(model="3d-unet", scenario="Offline", profile="smoke", model_file=exported),
                          [workloads_dir()])
    assert plan.checked is not None and plan.sample_shape() == (1, 32, 32, 32)
    with pytest.raises(UsageError, match="--profile smoke runs on its own data"):
        plan_inference(InferenceOptions(model="3d-unet", scenario="Offline", profile="smoke", model_file=exported,
                                        data=exported.parent), [workloads_dir()])


def test_the_smoke_target_is_taken_of_the_reference_as_its_script_prints_it(exported: Path, tmp_path: Path):
    """The run's Dice is read from its script's line (5 decimals): so is the reference it is held to, or
    a model of Dice 0.0000149 would miss 99.9% of itself (0.001% < 0.00149%)."""
    from orchestrator.inference.session import Inputs, target_of

    plan = plan_inference(InferenceOptions(model="3d-unet", scenario="Offline", profile="smoke", model_file=exported),
                          [workloads_dir()])
    inputs = Inputs(model_file=exported, model_sha256="0", data=tmp_path, extra_args=(), target_percent=None)
    facts = {"reference_accuracy": {"percent": 0.00149, "line": "Accuracy: mean = 0.00001, kidney = 0.0000, "
                                                                "tumor = 0.0000"}}
    assert target_of(plan, inputs, facts) == pytest.approx(0.999 * 0.001)
    with pytest.raises(Exception, match="no reference_accuracy"):
        target_of(plan, inputs, {})


def test_a_model_whose_input_the_rules_fix_is_still_held_to_it(tmp_path: Path):
    model = tiny.export(tmp_path / "small.onnx", side=64)
    (tmp_path / "data").mkdir()
    with pytest.raises(UsageError, match=r"has shape \[batch, 3, 64, 64\], the model takes \[N, 3, 224, 224\]"):
        plan_inference(InferenceOptions(model="resnet50", scenario="Offline", profile="qualify", model_file=model,
                                        data=tmp_path / "data"), [workloads_dir()])


@pytest.mark.slow  # about 2 minutes on 2 busy cores: the smoke data made, a torch program's window read, one run
def test_smoke_runs_an_exported_torch_program_against_its_own_accuracy(cli, mltrain_env, exported: Path):
    """`--profile smoke --backend torch --trust-model --model FILE.pt2`: the smoke data is prepared for the
    program's own window (read by the harness: mltrain cannot read a .pt2 without running it; before, the
    declared 128^3 was taken and the harness blamed the data), and the Dice target is 99.9% of the file's
    own FP32 Dice on the same cases (before: of the Dice its training logged on other cases)."""
    import json

    program = exported.parent / "unet.pt2"
    export(exported.parent / "seed", program)
    results = exported.parent / "r"
    r = cli("infer", "3d-unet", "--profile", "smoke", "--backend", "torch", "--trust-model", "--model", str(program),
            "--results", str(results), "--json")
    assert r.code == 0, r.err
    assert "smoke 3d-unet data made in " in r.err
    record = json.loads(r.out)
    accuracy = record["result"]["accuracy"]
    harness = json.loads((results / record["run_id"] / "jobs" / "main" / "results" / "harness.json").read_text())
    own = harness["reference_accuracy"]
    assert own["samples"] == accuracy["samples"] and "the accuracy run itself" in own["how"]
    assert own["line"] == accuracy["line"] and own["percent"] == pytest.approx(accuracy["percent"], abs=1e-3)
    assert accuracy["target_percent"] == pytest.approx(0.999 * accuracy["percent"]) and accuracy["met"]
    assert json.loads((Path(record["data_dir"]) / "index.json").read_text())["roi"] == [32, 32, 32]
    assert "the target 99.9% of the model's own FP32 DICE on the same samples" in " ".join(
        record["result"]["official_gaps"])
