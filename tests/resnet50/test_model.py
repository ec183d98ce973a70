from __future__ import annotations

import pytest
import torch

from workloads.resnet50.model import Bottleneck, ModelConfig, ResNet50, count_parameters


def test_resnet50_has_the_reference_parameter_count():
    assert count_parameters(ResNet50(ModelConfig(num_classes=1000))) == 25_557_032


def test_downsampling_stride_sits_on_the_3x3_convolution_v1_5():
    model = ResNet50(ModelConfig(num_classes=10))
    for index, stage in enumerate(model.stages):
        first: Bottleneck = stage[0]
        assert first.conv1.stride == (1, 1)
        assert first.conv2.stride == ((1, 1) if index == 0 else (2, 2))
        assert first.conv2.kernel_size == (3, 3)


def test_last_batchnorm_of_each_block_starts_at_zero():
    model = ResNet50(ModelConfig(num_classes=10, width=8))
    blocks = [m for m in model.modules() if isinstance(m, Bottleneck)]
    assert len(blocks) == 16
    assert all(float(b.bn3.weight.detach().abs().sum()) == 0.0 for b in blocks)


def test_scaled_model_keeps_shapes_and_channels_last_matches():
    torch.manual_seed(0)
    model = ResNet50(ModelConfig(num_classes=7, width=8, layers=(1, 1, 1, 1), zero_init_residual=False)).eval()
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        plain = model(x)
        fast = model.to(memory_format=torch.channels_last)(x.contiguous(memory_format=torch.channels_last))
    assert plain.shape == (2, 7)
    torch.testing.assert_close(plain, fast, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("bad", [{"num_classes": 1}, {"width": 0}, {"layers": (3, 4, 6)}, {"layers": (1, 0, 1, 1)}])
def test_model_config_rejects_bad_shapes(bad):
    with pytest.raises(ValueError):
        ModelConfig(**bad)
