"""Which tensor to multiply so that a Linear's effective weight is multiplied by a positive factor.

A function-preserving rescale (WISCA) multiplies weights by S > 0: a scalar ("tensor"), one factor per row
("rows") or per column ("columns"). On a plain Linear that is `weight * S`. On a parametrized one
(`torch.nn.utils.parametrize`, e.g. the PC layer) `weight` is computed, W_eff = f(W_raw): multiplying the
computed tensor is lost at its next access, so S has to go into W_raw, which is also the tensor the optimizer
holds state for. That scales W_eff by S only where f(S * W) = S * f(W); each parametrization says whether it
does through `scaling_problem(kind) -> str | None` (None: it does), and one that says nothing is taken not to.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.utils import parametrize

SCALE_KINDS = ("tensor", "rows", "columns")


def scaling_problem(linear: nn.Module, kind: str) -> str | None:
    """Why `linear`'s effective weight cannot be scaled by a factor of `kind` through its storage, or None."""
    if kind not in SCALE_KINDS:
        raise ValueError(f"kind must be one of {', '.join(SCALE_KINDS)}, not {kind!r}")
    if not parametrize.is_parametrized(linear, "weight"):
        return None
    chain = linear.parametrizations.weight
    if not isinstance(getattr(chain, "original", None), nn.Parameter):
        return "its weight is computed from several tensors"
    for parametrization in chain:  # a composition commutes with S when every step does
        check = getattr(parametrization, "scaling_problem", None)
        if check is None:
            return f"its weight is computed by {type(parametrization).__name__}, which declares no scaling rule"
        reason = check(kind)
        if reason:
            return reason
    return None


def scalable_weight(linear: nn.Module, kind: str) -> torch.Tensor:
    """The trainable tensor whose scaling by S scales `linear.weight` by S (raises where none exists)."""
    reason = scaling_problem(linear, kind)
    if reason:
        raise ValueError(f"Cannot rescale this weight exactly: {reason}.")
    if parametrize.is_parametrized(linear, "weight"):
        return linear.parametrizations.weight.original
    return linear.weight
