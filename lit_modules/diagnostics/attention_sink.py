"""Attention sink: how much attention queries put on the first token.

The small-initialization paper (arXiv 2606.17945) says small init intensifies the attention sink and
that gated attention removes it. Its exact measure is UNCONFIRMED (shared/reference/papers.md section
2); we use the standard one (also the Qwen gated-attention paper's): the mean attention probability
that queries at positions t > 0 put on key position 0. Position 0 itself is left out because its only
possible key is itself (probability 1 by construction).

Reference value: perfectly uniform causal attention gives mean over t = 1..T-1 of 1/(t+1), logged as
`attention_sink/uniform_reference`, so a number well above it means a sink.

Probabilities come from `model.attention_probs(tokens)`, which runs the model's own modules, so a
model whose weights are parametrized (e.g. the PC layer) is measured as trained. Sequences are
processed one at a time to keep only one sequence's [H, T, T] maps per layer in memory.
"""

from __future__ import annotations

from typing import Sequence

import torch

from lit_modules.diagnostics.registry import DiagnosticContext, DiagnosticResult, register


def sink_share_per_head(probs: Sequence[torch.Tensor]) -> torch.Tensor:
    """[n_layers, n_heads]: mean over batch and query positions t > 0 of probs[b, h, t, 0].

    `probs` is one [B, H, T, T] tensor per layer (rows = queries, columns = keys).
    """
    shares = []
    for layer, p in enumerate(probs):
        if p.ndim != 4 or p.shape[-1] != p.shape[-2]:
            raise ValueError(
                f"Layer {layer} attention probabilities must be [B, H, T, T], got {tuple(p.shape)}."
            )
        if p.shape[-1] < 2:
            raise ValueError("The attention sink needs sequences of at least two tokens.")
        shares.append(p[:, :, 1:, 0].float().mean(dim=(0, 2)))
    return torch.stack(shares)


def sink_share(probs: Sequence[torch.Tensor]) -> torch.Tensor:
    """[n_layers]: the per-layer sink share, averaged over heads."""
    return sink_share_per_head(probs).mean(dim=1)


def uniform_sink_share(seq_len: int) -> float:
    """The sink share of uniform causal attention: mean over t = 1..T-1 of 1 / (t + 1)."""
    if seq_len < 2:
        raise ValueError("The attention sink needs sequences of at least two tokens.")
    return sum(1.0 / (t + 1) for t in range(1, seq_len)) / (seq_len - 1)


@register("attention_sink")
def attention_sink_diagnostic(ctx: DiagnosticContext) -> DiagnosticResult:
    attention_probs = getattr(ctx.model, "attention_probs", None)
    if attention_probs is None:
        raise TypeError(
            f"{type(ctx.model).__name__} has no attention_probs(tokens); the attention sink needs it."
        )
    tokens = ctx.tokens
    per_head = None
    for b in range(tokens.shape[0]):  # one sequence at a time: bounded memory, same mean (equal lengths)
        share = sink_share_per_head(attention_probs(tokens[b : b + 1]))
        per_head = share if per_head is None else per_head + share
    per_head = per_head / tokens.shape[0]
    metrics: dict[str, float] = {}
    for layer, heads in enumerate(per_head):
        metrics[f"attention_sink/layers.{layer}"] = heads.mean().item()
        metrics[f"attention_sink/layers.{layer}/max_head"] = heads.max().item()
    metrics["attention_sink/mean"] = per_head.mean().item()
    metrics["attention_sink/max_head"] = per_head.max().item()
    metrics["attention_sink/uniform_reference"] = uniform_sink_share(tokens.shape[1])
    return DiagnosticResult(metrics=metrics)
