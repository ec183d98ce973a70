"""The 3D U-Net of the MLPerf image-segmentation benchmark (KiTS19), scalable for smoke runs.

Closed division (``UNet3DConfig()``): filters 32, 64, 128, 256, 320 and a 320 bottleneck,
31,190,243 parameters. Every stride-2 level halves each spatial size, so an input side must
be divisible by ``2 ** len(filters)`` (32 for the closed net) and leave at least 2 voxels per
axis at the bottleneck for InstanceNorm (64^3 or more for the closed net).

Shapes in comments: B batch, C channels, D/H/W spatial sizes of the input.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn

CLOSED_FILTERS = (32, 64, 128, 256, 320)


@dataclass(frozen=True, kw_only=True)
class UNet3DConfig:
    """Width and depth of the net; the defaults are the closed-division model."""

    filters: tuple[int, ...] = field(default=CLOSED_FILTERS)
    """Channels per level; the last one is also the bottleneck's width."""
    in_channels: int = 1
    """Input channels (CT intensity)."""
    n_classes: int = 3
    """Output classes: background, kidney, tumour."""

    def __post_init__(self) -> None:
        if len(self.filters) < 2:
            raise ValueError(f"filters: need at least 2 levels, got {self.filters}")
        if any(f < 1 for f in self.filters):
            raise ValueError(f"filters: every level needs at least 1 channel, got {self.filters}")
        if self.in_channels < 1 or self.n_classes < 2:
            raise ValueError("in_channels must be >= 1 and n_classes >= 2")

    @property
    def divisor(self) -> int:
        """Every input side must be a multiple of this (one halving per down block + bottleneck)."""
        return 2 ** len(self.filters)

    @property
    def is_closed(self) -> bool:
        """True for the reference model of the closed division."""
        return self.filters == CLOSED_FILTERS and self.in_channels == 1 and self.n_classes == 3


def conv_block(in_ch: int, out_ch: int, stride: int = 1) -> nn.Sequential:
    """conv 3x3x3 (no bias: a norm follows) -> InstanceNorm3d(affine) -> ReLU.

    The ReLU is out of place, as the reference's: InstanceNorm3d returns a view of its output, and an
    in-place op on a view makes autograd rebase it (CopySlices), which costs a clone, three copies and
    a zero fill of the activation per block in the backward pass (13 GiB more written per fp32 step
    at the closed shapes), on any device. Nothing is saved by it either: the norm's backward keeps
    its input, not its output, so the norm's output is freed once the ReLU has run."""
    return nn.Sequential(
        nn.Conv3d(in_ch, out_ch, kernel_size=3, stride=stride, padding=1, bias=False),  # (B, out, D/s, H/s, W/s)
        nn.InstanceNorm3d(out_ch, affine=True),
        nn.ReLU(),
    )


class InputBlock(nn.Module):
    def __init__(self, in_ch: int, out_ch: int) -> None:
        super().__init__()
        self.conv1 = conv_block(in_ch, out_ch)
        self.conv2 = conv_block(out_ch, out_ch)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv2(self.conv1(x))  # (B, C_in, D, H, W) -> (B, C_out, D, H, W)


class DownBlock(nn.Module):
    def __init__(self, in_ch: int, out_ch: int) -> None:
        super().__init__()
        self.conv1 = conv_block(in_ch, out_ch, stride=2)
        self.conv2 = conv_block(out_ch, out_ch)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv2(self.conv1(x))  # (B, C_in, S, S, S) -> (B, C_out, S/2, S/2, S/2)


class UpBlock(nn.Module):
    def __init__(self, in_ch: int, out_ch: int) -> None:
        super().__init__()
        # Transposed conv with bias, no norm and no activation (as the reference).
        self.upsample = nn.ConvTranspose3d(in_ch, out_ch, kernel_size=2, stride=2, bias=True)
        self.conv1 = conv_block(2 * out_ch, out_ch)
        self.conv2 = conv_block(out_ch, out_ch)

    def forward(self, x: torch.Tensor, skip: torch.Tensor) -> torch.Tensor:
        x = self.upsample(x)  # (B, C_in, S, S, S) -> (B, C_out, 2S, 2S, 2S)
        x = torch.cat((x, skip), dim=1)  # (B, 2*C_out, 2S, 2S, 2S)
        return self.conv2(self.conv1(x))  # (B, C_out, 2S, 2S, 2S)


class UNet3D(nn.Module):
    """Encoder: input block + one down block per further level + a bottleneck down block;
    decoder: one up block per down block, each fed the matching encoder output."""

    def __init__(self, config: UNet3DConfig) -> None:
        super().__init__()
        f = config.filters
        self.config = config
        self.input_block = InputBlock(config.in_channels, f[0])
        self.downsample = nn.ModuleList(DownBlock(i, o) for i, o in zip(f[:-1], f[1:], strict=True))
        self.bottleneck = DownBlock(f[-1], f[-1])
        ups = [UpBlock(f[-1], f[-1])]
        ups += [UpBlock(i, o) for i, o in zip(reversed(f[1:]), reversed(f[:-1]), strict=True)]
        self.upsample = nn.ModuleList(ups)
        self.output = nn.Conv3d(f[0], config.n_classes, kernel_size=1, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.input_block(x)  # (B, f0, D, H, W)
        skips = [x]
        for down in self.downsample:
            x = down(x)  # level l: (B, f_l, D/2^l, H/2^l, W/2^l)
            skips.append(x)
        x = self.bottleneck(x)  # (B, f_last, D/2^L, H/2^L, W/2^L), L = len(filters)
        for up, skip in zip(self.upsample, reversed(skips), strict=True):
            x = up(x, skip)  # back up one level per block
        return self.output(x)  # (B, n_classes, D, H, W) logits


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
