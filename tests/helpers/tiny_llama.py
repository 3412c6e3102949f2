"""The tiny Llama of the model/test_transformer_*.py tests: its config, a seeded build, its batches."""

from functools import partial

import torch

from lit_modules.model import Llama, LlamaConfig
from tests.helpers.models import tokens as random_tokens

VOCAB = 97


def make_cfg(**overrides) -> LlamaConfig:
    base = dict(vocab_size=VOCAB, d_model=32, n_layers=2, n_heads=4, d_ff=48, max_seq_len=16)
    base.update(overrides)
    return LlamaConfig(**base)


def build(seed: int = 0, **overrides) -> Llama:
    torch.manual_seed(seed)
    return Llama(make_cfg(**overrides))


tokens = partial(random_tokens, VOCAB, length=12, seed=1)  # these tests' batches: 2 x 12 ids, seed 1
