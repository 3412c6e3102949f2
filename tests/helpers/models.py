"""Small initialized models and inputs for tests of model transforms (no data, no trainer)."""

from __future__ import annotations

import torch

from lit_modules.model import InitConfig, Llama, LlamaConfig, init_weights

FIXED_STD = InitConfig(rule="fixed", std=0.1)


def small_llama(seed: int = 0, init: InitConfig | None = FIXED_STD, **cfg) -> Llama:
    """A 2-layer GQA model with std-0.1 weights (large enough that a changed function shows in the logits).

    `cfg` overrides any config field; `init` is another rule drawn from `seed`, or None for the constructor's
    own init drawn from torch's global generator after torch.manual_seed(seed)."""
    params = dict(vocab_size=50, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, d_ff=48, max_seq_len=16)
    params.update(cfg)
    if init is None:
        torch.manual_seed(seed)
        return Llama(LlamaConfig(**params))
    model = Llama(LlamaConfig(**params))
    init_weights(model, init, generator=torch.Generator().manual_seed(seed))
    return model


def tokens(vocab: int, batch: int = 2, length: int = 24, seed: int = 0) -> torch.Tensor:
    """A (batch, length) tensor of ids below `vocab`, drawn from its own generator seeded with `seed`."""
    return torch.randint(0, vocab, (batch, length), generator=torch.Generator().manual_seed(seed))


def token_batch(model: Llama, seed: int = 1, batch: int = 3, length: int = 12) -> torch.Tensor:
    return tokens(model.cfg.vocab_size, batch, length, seed)
