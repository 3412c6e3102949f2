"""`expert_load`: how evenly a mixture of experts routes the fixed held-out batch (model/moe.py).

Per MoE layer i, from the share f_e of dispatched (token, slot) pairs each expert receives:
    diag/expert_load/layer{i}/max_share    max_e f_e (1/E at perfect balance, 1 when one expert takes all)
    diag/expert_load/layer{i}/cv           std_e f_e / mean_e f_e (0 at perfect balance)
    diag/expert_load/layer{i}/entropy      -sum_e f_e ln f_e / ln E (1 at perfect balance, 0 for one expert)
    diag/expert_load/layer{i}/aux          the layer's load-balancing loss on this batch, coefficient included
and their means over layers (`diag/expert_load/<stat>`). A dense model reports nothing.
"""

from __future__ import annotations

import math

import torch

from lit_modules.diagnostics.registry import DiagnosticContext, DiagnosticResult, register
from lit_modules.model.moe import MoE


def load_stats(share: torch.Tensor) -> dict[str, float]:
    n = share.numel()
    nonzero = share[share > 0]
    return {
        "max_share": float(share.max()),
        "cv": float(share.std(unbiased=False) / share.mean()),
        "entropy": float(-(nonzero * nonzero.log()).sum() / math.log(n)),
    }


@register("expert_load")
def expert_load(ctx: DiagnosticContext) -> DiagnosticResult:
    layers = [m for m in ctx.model.modules() if isinstance(m, MoE)]
    if not layers:
        return DiagnosticResult()
    ctx.model(ctx.tokens)
    metrics: dict[str, float] = {}
    per_stat: dict[str, list[float]] = {}
    for i, layer in enumerate(layers):
        stats = {**load_stats(layer.load), "aux": float(layer.aux_loss)}
        for key, value in stats.items():
            metrics[f"expert_load/layer{i}/{key}"] = value
            per_stat.setdefault(key, []).append(value)
    metrics.update({f"expert_load/{k}": sum(v) / len(v) for k, v in per_stat.items()})
    return DiagnosticResult(metrics=metrics)
