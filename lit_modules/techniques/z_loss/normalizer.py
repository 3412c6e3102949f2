"""The log of the softmax normalizer, log Z = logsumexp(logits), and the z-loss on it.

    z_loss(logits, targets, coef) = coef * mean over target positions of (log Z)^2

Positions whose target is the ignore index (-100: a masked prompt token of an SFT batch) are left out, as
the next-token loss leaves them out. Computed in float32 whatever the forward's dtype.
"""

from __future__ import annotations

import torch

from lit_modules.diagnostics.logit_normalizer import log_normalizer  # the quantity its diagnostic reads

IGNORE_INDEX = -100


def z_loss(logits: torch.Tensor, targets: torch.Tensor, coef: float) -> torch.Tensor:
    """coef * mean((log Z)^2) over the positions with a target (0 when there is none)."""
    counted = targets != IGNORE_INDEX
    squares = log_normalizer(logits).pow(2)[counted]
    if squares.numel() == 0:
        return squares.sum()  # a zero that keeps the graph and the device
    return coef * squares.mean()
