"""A finished seed's weights (written by the trainer after run_stop) exported as the model MLPerf
Inference's 3D-UNet takes: the reference converter's conventions (input ``input``, output ``output``,
a free ``batch_size`` axis, opset 12), and the same logits in ONNX Runtime and torch.export as in torch."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

from workloads.common.errors import DataError
from workloads.unet3d.export import export, load, save
from workloads.unet3d.model import UNet3D, UNet3DConfig


@pytest.fixture(scope="module")
def seed_results(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, UNet3D]:
    torch.manual_seed(0)
    network = UNet3D(UNet3DConfig(filters=(4, 8))).eval()
    results = tmp_path_factory.mktemp("seed")
    save(network, network.config, (16, 16, 16), results, {"status": "success"})
    return results, network


def test_the_onnx_model_follows_the_reference_converter_and_computes_the_trained_logits(seed_results, tmp_path: Path):
    results, network = seed_results
    written = export(results, tmp_path / "m.onnx")
    model = onnx.load(str(tmp_path / "m.onnx"))
    dims = [d.dim_param or d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    assert model.graph.input[0].name == "input" and model.graph.output[0].name == "output"
    assert dims == ["batch_size", 1, 16, 16, 16] and model.opset_import[0].version == 12
    assert written["input"] == ["batch_size", 1, 16, 16, 16]
    x = np.random.default_rng(0).standard_normal((3, 1, 16, 16, 16)).astype(np.float32)
    session = ort.InferenceSession(str(tmp_path / "m.onnx"), providers=["CPUExecutionProvider"])
    with torch.inference_mode():
        expected = network(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(session.run(["output"], {"input": x})[0], expected, rtol=1e-4, atol=1e-4)
    export(results, tmp_path / "m.pt2")
    program = torch.export.load(str(tmp_path / "m.pt2")).module()
    with torch.inference_mode():
        np.testing.assert_allclose(program(torch.from_numpy(x)).numpy(), expected, rtol=1e-5, atol=1e-5)


def test_a_seed_without_weights_or_a_bad_target_is_one_line(seed_results, tmp_path: Path):
    with pytest.raises(DataError, match="no trained weights"):
        load(tmp_path)
    with pytest.raises(DataError, match=r"give a \.onnx .* or \.pt2"):
        export(seed_results[0], tmp_path / "m.bin")
