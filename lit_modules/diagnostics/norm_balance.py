"""Norm balance of the attention pairs: ||W_q||_1 / ||W_k||_1 and ||W_v||_1 / ||W_o||_1 per layer.

WISCA (arXiv 2508.16676, shared/reference/papers.md section 1) rescales each pair so that its two entrywise L1
norms are equal (ratio 1) without changing the function. Measured on every arm of an ablation (the `origin`
baseline included), this says how unbalanced a model is before, between and without transitions: a GQA
model with g query heads per KV head starts near g (W_k has 1/g of W_q's entries at the same std), an MHA
model with equal shapes near 1. `norm_balance/max_abs_log_ratio` is the largest |ln ratio| over every pair
and layer (0: balanced everywhere).
"""

from __future__ import annotations

import math

import torch

from lit_modules.diagnostics.registry import DiagnosticContext, DiagnosticResult, register

PAIRS = {"qk_l1_ratio": ("q_proj", "k_proj"), "vo_l1_ratio": ("v_proj", "o_proj")}


def l1_ratio(numerator: torch.Tensor, denominator: torch.Tensor) -> float:
    """||A||_1 / ||B||_1 (entrywise, float64 sums); nan when B is all zeros."""
    low = denominator.detach().double().abs().sum().item()
    return numerator.detach().double().abs().sum().item() / low if low > 0 else float("nan")


@register("norm_balance")
@torch.no_grad()
def norm_balance_diagnostic(ctx: DiagnosticContext) -> DiagnosticResult:
    metrics: dict[str, float] = {}
    worst = 0.0
    for i, layer in enumerate(getattr(ctx.model, "layers", ())):
        attn = layer.attn
        for key, (num, den) in PAIRS.items():
            ratio = l1_ratio(getattr(attn, num).weight, getattr(attn, den).weight)
            metrics[f"norm_balance/layer{i}/{key}"] = ratio
            if ratio > 0 and math.isfinite(ratio):
                worst = max(worst, abs(math.log(ratio)))
    if metrics:
        metrics["norm_balance/max_abs_log_ratio"] = worst
    return DiagnosticResult(metrics=metrics)
