"""The 3D U-Net: the closed model's size and structure, and the shapes of a scaled-down one."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from workloads.unet3d.model import CLOSED_FILTERS, UNet3D, UNet3DConfig, count_parameters


def test_closed_model_has_the_reference_parameter_count():
    model = UNet3D(UNet3DConfig())
    assert UNet3DConfig().is_closed
    assert count_parameters(model) == 31_190_243


def test_closed_model_structure_matches_the_spec():
    model = UNet3D(UNet3DConfig())
    assert [block.conv1[0].out_channels for block in model.downsample] == [64, 128, 256, 320]
    assert model.bottleneck.conv1[0].out_channels == 320
    ups = [(u.upsample.in_channels, u.upsample.out_channels) for u in model.upsample]
    assert ups == [(320, 320), (320, 256), (256, 128), (128, 64), (64, 32)]
    convs = [m for m in model.modules() if isinstance(m, nn.Conv3d)]
    # every 3x3x3 conv is followed by InstanceNorm and has no bias; only the 1x1x1 output conv has one
    assert [c.kernel_size for c in convs if c.bias is not None] == [(1, 1, 1)]
    assert all(u.upsample.bias is not None for u in model.upsample)
    norms = [m for m in model.modules() if isinstance(m, nn.InstanceNorm3d)]
    assert norms and all(n.affine for n in norms)
    assert model.output.out_channels == 3


def autograd_node_names(root: torch.autograd.graph.Node) -> list[str]:
    """Names of every node of the backward graph reachable from ``root``."""
    seen, stack, names = set(), [root], []
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        names.append(node.name())
        stack.extend(next_node for next_node, _ in node.next_functions)
    return names


def test_backward_graph_has_no_copy_slices_and_one_relu_per_norm():
    """InstanceNorm3d returns a view; an in-place ReLU on it makes autograd rebase the view (CopySlices,
    extra copies of every activation in the backward pass). The reference's ReLU is out of place."""
    model = UNet3D(UNet3DConfig(filters=(2, 4)))
    names = autograd_node_names(model(torch.randn(1, 1, 8, 8, 8)).grad_fn)  # (B, 1, D, H, W) -> logits
    norms = sum(isinstance(m, nn.InstanceNorm3d) for m in model.modules())
    rebased = [name for name in names if name.endswith("CopySlices") or name.startswith("AsStrided")]
    assert rebased == []
    assert names.count("ReluBackward0") == norms


@pytest.mark.parametrize("filters, shape", [((4, 8), (8, 12, 16)), ((2, 4, 8), (16, 16, 32))])
def test_scaled_model_maps_input_to_logits_of_the_same_size(filters, shape):
    model = UNet3D(UNet3DConfig(filters=filters))
    x = torch.randn(2, 1, *shape)  # (B, 1, D, H, W)
    assert model(x).shape == (2, 3, *shape)
    assert UNet3DConfig(filters=filters).divisor == 2 ** len(filters)
    assert not UNet3DConfig(filters=filters).is_closed


def test_same_seed_gives_the_same_initial_weights():
    torch.manual_seed(3)
    a = UNet3D(UNet3DConfig(filters=(2, 4)))
    torch.manual_seed(3)
    b = UNet3D(UNet3DConfig(filters=(2, 4)))
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters(), strict=True))


@pytest.mark.parametrize("filters", [(8,), (8, 0, 4)])
def test_bad_filters_are_rejected(filters):
    with pytest.raises(ValueError, match="filters"):
        UNet3DConfig(filters=filters)


def test_closed_filters_constant():
    assert CLOSED_FILTERS == (32, 64, 128, 256, 320)
