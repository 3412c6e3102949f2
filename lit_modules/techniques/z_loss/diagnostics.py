"""`logit_normalizer`: how far the softmax normalizer of held-out logits is from 1 (log Z from 0).

Registered from the technique's folder so that every arm of an ablation, the baseline without z-loss
included, measures it the same way: mean, mean |.|, root mean square and max |.| of log Z over the fixed
held-out batch's positions (`diag/logit_normalizer/<stat>`).
"""

from __future__ import annotations

from lit_modules.diagnostics.registry import DiagnosticContext, DiagnosticResult, register
from lit_modules.techniques.z_loss.normalizer import log_normalizer


@register("logit_normalizer")
def logit_normalizer(ctx: DiagnosticContext) -> DiagnosticResult:
    log_z = log_normalizer(ctx.model(ctx.tokens))
    return DiagnosticResult(metrics={
        "logit_normalizer/mean": float(log_z.mean()),
        "logit_normalizer/mean_abs": float(log_z.abs().mean()),
        "logit_normalizer/rms": float(log_z.pow(2).mean().sqrt()),
        "logit_normalizer/max_abs": float(log_z.abs().max()),
    })
