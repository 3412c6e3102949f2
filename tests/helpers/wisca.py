"""Models with unbalanced q/k/v/o weights, batches and weight snapshots for the WISCA transition tests."""

from __future__ import annotations

from functools import partial

import torch

from lit_modules.model import Llama, LlamaConfig
from tests.helpers.models import tokens as random_tokens

VOCAB = 61

MODELS = {
    "mha": dict(n_heads=4, n_kv_heads=None),
    "gqa": dict(n_heads=8, n_kv_heads=2),
    "mqa": dict(n_heads=4, n_kv_heads=1),
    "gqa_gate_elementwise": dict(n_heads=8, n_kv_heads=2, attn_gate="elementwise"),
    "gqa_gate_headwise": dict(n_heads=8, n_kv_heads=2, attn_gate="headwise"),
}


def unbalanced_model(seed: int = 0, **overrides) -> Llama:
    """A small model whose q/k/v/o rows (o: columns) have very different L1 norms (every scale nontrivial).

    Row magnitudes are log-uniform in [0.1, 10] independently per row, so the two channels of a RoPE pair
    differ too (needed for the pairing test to mean something).
    """
    torch.manual_seed(seed)
    cfg = dict(vocab_size=VOCAB, d_model=64, n_layers=2, d_ff=96, max_seq_len=32)
    cfg.update(overrides)
    model = Llama(LlamaConfig(**cfg))
    gen = torch.Generator().manual_seed(seed + 100)

    def spread(n: int) -> torch.Tensor:
        return 10 ** (torch.rand(n, generator=gen) * 2 - 1)

    with torch.no_grad():
        for layer in model.layers:
            attn = layer.attn
            for proj in (attn.q_proj, attn.k_proj, attn.v_proj):
                proj.weight.mul_(spread(proj.weight.shape[0])[:, None])
            attn.o_proj.weight.mul_(spread(attn.o_proj.weight.shape[1])[None, :])
            attn.q_proj.weight.mul_(3.0)  # and a global imbalance on top
    return model


tokens = partial(random_tokens, VOCAB, length=24, seed=1)  # these tests' batches: 2 x 24 ids, seed 1


def attn_weights(model: Llama) -> list[dict[str, torch.Tensor]]:
    return [{n: getattr(l.attn, n).weight.detach().clone() for n in ("q_proj", "k_proj", "v_proj", "o_proj")}
            for l in model.layers]
