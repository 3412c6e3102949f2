"""`logit_normalizer`: how far the softmax normalizer of held-out logits is from 1 (log Z from 0).

A diagnostic of any model, so that every arm of an ablation, the baseline without z-loss included, measures
it the same way: mean, mean |.|, root mean square and max |.| of log Z over the fixed held-out batch's
positions (`diag/logit_normalizer/<stat>`). `log_normalizer` is defined here, below the techniques, and
z-loss (techniques/z_loss/normalizer.py) penalises this same quantity.
"""

from __future__ import annotations

import torch

from lit_modules.diagnostics.registry import DiagnosticContext, DiagnosticResult, register


def log_normalizer(logits: torch.Tensor) -> torch.Tensor:
    """log Z = logsumexp(logits) per position, in float32 whatever the forward's dtype: [..., vocab] -> [...]."""
    return torch.logsumexp(logits.float(), dim=-1)


@register("logit_normalizer")
def logit_normalizer(ctx: DiagnosticContext) -> DiagnosticResult:
    log_z = log_normalizer(ctx.model(ctx.tokens))
    return DiagnosticResult(metrics={
        "logit_normalizer/mean": float(log_z.mean()),
        "logit_normalizer/mean_abs": float(log_z.abs().mean()),
        "logit_normalizer/rms": float(log_z.pow(2).mean().sqrt()),
        "logit_normalizer/max_abs": float(log_z.abs().max()),
    })
