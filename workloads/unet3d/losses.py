"""Soft Dice + cross-entropy training loss and the hard Dice score of the benchmark.

Both ignore the background class: the Dice terms are those of classes 1 (kidney) and 2
(tumour), with smoothing 1e-6 in numerator and denominator, as in the reference.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

SMOOTH = 1e-6


def one_hot(label: torch.Tensor, n_classes: int) -> torch.Tensor:
    """(B, 1, D, H, W) integer label -> (B, n_classes, D, H, W) float one-hot."""
    return F.one_hot(label[:, 0].long(), n_classes).permute(0, 4, 1, 2, 3).to(torch.float32)


def dice_per_class(prediction: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Dice of each foreground class of each sample: (B, C, ...) x 2 -> (B, C - 1).

    ``prediction`` holds probabilities or a one-hot map; ``target`` a one-hot map.
    """
    prediction, target = prediction[:, 1:], target[:, 1:]  # drop the background
    dims = tuple(range(2, prediction.ndim))
    # target * prediction, the reference's operand order: prediction * target rounds the gradient
    # differently in the last bit
    intersection = torch.sum(target * prediction, dim=dims)
    total = torch.sum(prediction, dim=dims) + torch.sum(target, dim=dims)
    return (2.0 * intersection + SMOOTH) / (total + SMOOTH)


class DiceCELoss(nn.Module):
    """(mean over samples and classes 1..C-1 of (1 - soft Dice) + cross-entropy) / 2."""

    def forward(self, logits: torch.Tensor, label: torch.Tensor) -> torch.Tensor:
        # logits (B, C, D, H, W), label (B, 1, D, H, W) integer classes
        logits = logits.float()  # the loss is computed in fp32 also under autocast
        cross_entropy = F.cross_entropy(logits, label[:, 0].long())
        probabilities = torch.softmax(logits, dim=1)
        dice = dice_per_class(probabilities, one_hot(label, logits.shape[1]))
        return (torch.mean(1.0 - dice) + cross_entropy) / 2


class FusedDiceCELoss(nn.Module):
    """``DiceCELoss`` from one log-softmax pass and no one-hot map: the same value and gradient up to
    rounding (the sums run in another order), fewer passes over the (B, C, D, H, W) logits.

    The reference computes a softmax for the Dice terms and, inside cross_entropy, a log-softmax;
    here the probabilities are exp(log-softmax), the cross-entropy is the negative log-probability
    of each voxel's class, and each class's intersection and target size are summed over the
    voxels of that class instead of against a materialised one-hot target."""

    def forward(self, logits: torch.Tensor, label: torch.Tensor) -> torch.Tensor:
        # logits (B, C, D, H, W), label (B, 1, D, H, W) integer classes
        logits = logits.float()
        classes = label.long()  # (B, 1, D, H, W)
        log_p = torch.log_softmax(logits, dim=1)
        cross_entropy = -torch.gather(log_p, 1, classes).mean()
        probabilities = log_p.exp()
        dims = tuple(range(2, logits.ndim))
        p_true = torch.gather(probabilities, 1, classes)  # (B, 1, D, H, W): the probability of the voxel's class
        dice = []
        for c in range(1, logits.shape[1]):  # the foreground classes
            mask = classes == c
            intersection = torch.sum(p_true * mask, dim=dims)[:, 0]
            total = torch.sum(probabilities[:, c], dim=tuple(d - 1 for d in dims)) + torch.sum(mask, dim=dims)[:, 0]
            dice.append((2.0 * intersection + SMOOTH) / (total + SMOOTH))
        return (torch.mean(1.0 - torch.stack(dice, dim=1)) + cross_entropy) / 2


def dice_score(logits: torch.Tensor, label: torch.Tensor) -> torch.Tensor:
    """Hard Dice of each foreground class, averaged over the batch: -> (C - 1,)."""
    n_classes = logits.shape[1]
    prediction = one_hot(torch.argmax(logits, dim=1, keepdim=True), n_classes)
    return torch.mean(dice_per_class(prediction, one_hot(label, n_classes)), dim=0)
