"""`mltrain data` for training workloads and inference models alike: its own help, the whole
how-to-get in mltrain's own commands, and `mltrain infer` naming each missing input with how to get it."""

from __future__ import annotations

from pathlib import Path


def test_data_help_lists_the_workloads_and_the_inference_models(cli):
    r = cli("data", "--help")
    assert r.code == 0 and r.out.startswith("Usage: mltrain data NAME")
    lines = dict(line.strip().split(":", 1) for line in r.out.splitlines()
                 if line.strip().startswith(("Training", "Inference")))
    assert "unet3d" in lines["Training workloads"] and "3d-unet" in lines["Inference models"]
    assert cli("data", "-h").out == r.out


def test_how_to_get_is_whole_and_in_mltrain_commands(cli):
    r = cli("data", "unet3d", "how-to-get")
    assert r.code == 0 and "python -m workloads" not in r.out
    assert "mltrain data unet3d verify-raw RAW" in r.out and "python -m starter_code.get_imaging" in r.out
    assert not r.out.rstrip().endswith(("and run", ":"))  # the old first-line hint stopped at '...and run'
    model = cli("data", "retinanet", "how-to-get")
    assert model.code == 0 and model.out.startswith("The retinanet model: ") and "The retinanet data: " in model.out


def test_an_unknown_name_says_what_is_known(cli):
    r = cli("data", "nosuch")
    assert r.code == 2 and "unknown workload or inference model 'nosuch'" in r.err and "retinanet" in r.err


def test_infer_names_each_missing_input_and_how_to_get_each(cli, tmp_path: Path):
    r = cli("infer", "resnet50", "--profile", "qualify", "--model", str(tmp_path / "none.onnx"),
            "--data", str(tmp_path / "nodata"), "--results", str(tmp_path / "r"))
    first, *how = r.err.splitlines()
    assert r.code == 2 and first == (f"error: --model {tmp_path / 'none.onnx'}: no such file; "
                                     f"--data {tmp_path / 'nodata'}: no such folder")
    assert how[0].startswith("  The resnet50 model: ") and any(line.startswith("  The resnet50 data: ") for line in how)
    data_only = cli("infer", "resnet50", "--profile", "qualify", "--model", str(Path(__file__)),
                    "--data", str(tmp_path / "nodata"), "--results", str(tmp_path / "r"))
    first, *how = data_only.err.splitlines()
    assert first == f"error: --data {tmp_path / 'nodata'}: no such folder"
    assert how[0].startswith("  The resnet50 data: ")
    assert not (tmp_path / "r").exists()
