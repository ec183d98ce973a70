"""ResNet-50 v1.5 in plain PyTorch (torchvision is not needed).

v1.5 differs from the original ResNet-50 (v1) in one place: in a downsampling bottleneck the
stride 2 sits on the 3x3 convolution, not on the first 1x1. With 1000 classes the model has
25,557,032 parameters. ``width`` and ``layers`` scale the same architecture down for smoke runs.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

EXPANSION = 4  # a bottleneck's output has 4x the channels of its 3x3 convolution


@dataclass(frozen=True, kw_only=True)
class ModelConfig:
    """Shape of the network."""

    num_classes: int = 1000
    """Outputs of the final fully connected layer."""
    width: int = 64
    """Channels of the stem and of the first stage's 3x3 convolutions (64 in ResNet-50)."""
    layers: tuple[int, int, int, int] = (3, 4, 6, 3)
    """Bottleneck blocks per stage (3, 4, 6, 3 in ResNet-50)."""
    zero_init_residual: bool = True
    """Start the last BatchNorm of every block at gamma = 0 (each block starts as identity)."""

    def __post_init__(self) -> None:
        if self.num_classes < 2:
            raise ValueError(f"num_classes must be >= 2, got {self.num_classes}")
        if self.width < 1:
            raise ValueError(f"width must be >= 1, got {self.width}")
        if len(self.layers) != 4 or any(n < 1 for n in self.layers):
            raise ValueError(f"layers must be four counts >= 1, got {self.layers}")


class Bottleneck(nn.Module):
    """1x1 reduce -> 3x3 (carries the stride, v1.5) -> 1x1 expand, plus the shortcut."""

    def __init__(self, in_channels: int, mid_channels: int, stride: int) -> None:
        super().__init__()
        out_channels = mid_channels * EXPANSION
        self.conv1 = nn.Conv2d(in_channels, mid_channels, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(mid_channels)
        self.conv2 = nn.Conv2d(mid_channels, mid_channels, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(mid_channels)
        self.conv3 = nn.Conv2d(mid_channels, out_channels, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out_channels)
        self.relu = nn.ReLU(inplace=True)
        self.downsample: nn.Module = nn.Identity()
        if stride != 1 or in_channels != out_channels:
            self.downsample = nn.Sequential(
                nn.Conv2d(in_channels, out_channels, 1, stride=stride, bias=False),
                nn.BatchNorm2d(out_channels),
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: (B, C_in, H, W)
        out = self.relu(self.bn1(self.conv1(x)))  # (B, C_mid, H, W)
        out = self.relu(self.bn2(self.conv2(out)))  # (B, C_mid, H/s, W/s)
        out = self.bn3(self.conv3(out))  # (B, 4*C_mid, H/s, W/s)
        return self.relu(out + self.downsample(x))


class ResNet50(nn.Module):
    """Stem, four stages of bottlenecks, global average pool, fully connected classifier."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        w = config.width
        self.stem = nn.Sequential(
            nn.Conv2d(3, w, 7, stride=2, padding=3, bias=False),
            nn.BatchNorm2d(w),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(3, stride=2, padding=1),
        )
        stages = []
        in_channels = w
        for index, blocks in enumerate(config.layers):
            mid = w * 2**index
            stride = 1 if index == 0 else 2
            stage = [Bottleneck(in_channels, mid, stride)]
            in_channels = mid * EXPANSION
            stage += [Bottleneck(in_channels, mid, 1) for _ in range(blocks - 1)]
            stages.append(nn.Sequential(*stage))
        self.stages = nn.Sequential(*stages)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(in_channels, config.num_classes)
        self._init_weights(config.zero_init_residual)

    def _init_weights(self, zero_init_residual: bool) -> None:
        for module in self.modules():
            if isinstance(module, nn.Conv2d):
                nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(module, nn.BatchNorm2d):
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)
        nn.init.normal_(self.fc.weight, std=0.01)
        nn.init.zeros_(self.fc.bias)
        if zero_init_residual:
            for module in self.modules():
                if isinstance(module, Bottleneck):
                    nn.init.zeros_(module.bn3.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: (B, 3, H, W), H = W = 224
        x = self.stem(x)  # (B, 64, H/4, W/4)
        x = self.stages(x)  # (B, 2048, H/32, W/32)
        x = self.pool(x).flatten(1)  # (B, 2048)
        return self.fc(x)  # (B, num_classes)


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
