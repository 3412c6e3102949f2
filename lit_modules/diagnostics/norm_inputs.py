"""What RMSNorm's epsilon is up against: the mean square of every RMSNorm's input on the held-out batch.

RMSNorm computes x / sqrt(mean(x^2) + eps). Where mean(x^2) is near eps or below it, eps dominates the
denominator and the norm stops normalizing: the small-initialization paper's reason for eps = 1e-12
(shared/reference/papers.md section 2). Logged per norm (`norm_inputs/<module>/mean_square`, the mean over
tokens of mean_d x^2), with the smallest of them, the eps in use and their ratio:
`norm_inputs/min_over_eps` >> 1 means eps cannot act anywhere in the model; <= ~10 means it shrinks the
normalized activations by a visible share (sqrt(ms / (ms + eps))).
"""

from __future__ import annotations

import torch
from torch import nn

from lit_modules.diagnostics.registry import DiagnosticContext, DiagnosticResult, register
from lit_modules.model.norm import RMSNorm


@register("norm_inputs")
@torch.no_grad()
def norm_inputs_diagnostic(ctx: DiagnosticContext) -> DiagnosticResult:
    norms = {name.replace("_orig_mod.", ""): m for name, m in ctx.model.named_modules() if isinstance(m, RMSNorm)}
    if not norms:
        return DiagnosticResult()
    sums: dict[str, list[float]] = {name: [] for name in norms}

    def hook(name: str):
        def record(_module: nn.Module, inputs: tuple[torch.Tensor, ...]) -> None:
            sums[name].append(inputs[0].float().pow(2).mean().item())
        return record

    handles = [m.register_forward_pre_hook(hook(name)) for name, m in norms.items()]
    was_training = ctx.model.training
    try:
        ctx.model.eval()
        for sequence in ctx.tokens:  # one sequence at a time: equal lengths, so the mean of means is the mean
            ctx.model(sequence.unsqueeze(0))
    finally:
        for handle in handles:
            handle.remove()
        ctx.model.train(was_training)
    metrics = {f"norm_inputs/{name}/mean_square": sum(v) / len(v) for name, v in sums.items() if v}
    smallest = min(metrics.values())
    eps = min(m.eps for m in norms.values())
    metrics.update({"norm_inputs/min_mean_square": smallest, "norm_inputs/eps": eps})
    if eps > 0:
        metrics["norm_inputs/min_over_eps"] = smallest / eps
    return DiagnosticResult(metrics=metrics)
