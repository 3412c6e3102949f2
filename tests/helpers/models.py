"""Small initialized models and inputs for tests of model transforms (no data, no trainer)."""

from __future__ import annotations

import torch

from lit_modules.model import InitConfig, Llama, LlamaConfig, init_weights


def small_llama(seed: int = 0, **cfg) -> Llama:
    """A 2-layer GQA model with std-0.1 weights (large enough that a changed function shows in the logits)."""
    params = dict(vocab_size=50, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, d_ff=48, max_seq_len=16)
    params.update(cfg)
    model = Llama(LlamaConfig(**params))
    init_weights(model, InitConfig(rule="fixed", std=0.1), generator=torch.Generator().manual_seed(seed))
    return model


def token_batch(model: Llama, seed: int = 1, batch: int = 3, length: int = 12) -> torch.Tensor:
    return torch.randint(0, model.cfg.vocab_size, (batch, length), generator=torch.Generator().manual_seed(seed))
