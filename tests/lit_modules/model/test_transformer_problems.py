"""LlamaConfig refusals: impossible configs raise when built and are listed by problems()."""

import pytest

from lit_modules.model import Llama, LlamaConfig
from tests.helpers.tiny_llama import make_cfg


def test_vocab_zero_raises():
    with pytest.raises(ValueError, match="vocab_size"):
        Llama(make_cfg(vocab_size=0))


def test_invalid_config_raises():
    with pytest.raises(ValueError, match="divisible"):
        Llama(make_cfg(d_model=30))


# ------------------------------------------------------------------- problems


@pytest.mark.parametrize(
    "overrides, fragment",
    [
        (dict(d_model=30), "not divisible by n_heads"),
        (dict(n_heads=4, n_kv_heads=3), "not divisible by n_kv_heads"),
        (dict(n_heads=4, n_kv_heads=8), "not divisible by n_kv_heads"),
        (dict(d_model=24, n_heads=8), "odd"),
        (dict(d_model=0), "d_model must be positive"),
        (dict(n_layers=0), "n_layers must be positive"),
        (dict(n_heads=-1), "n_heads must be positive"),
        (dict(n_kv_heads=0), "n_kv_heads must be positive"),
        (dict(d_ff=0), "d_ff must be positive"),
        (dict(max_seq_len=0), "max_seq_len must be positive"),
        (dict(vocab_size=-5), "vocab_size"),
        (dict(rope_theta=0.0), "rope_theta"),
        (dict(norm_eps=-1e-6), "norm_eps"),
        (dict(attn_gate="sigmoid"), "attn_gate"),
    ],
)
def test_problems_catch_impossible_configs(overrides, fragment):
    problems = make_cfg(**overrides).problems()
    assert any(fragment in p for p in problems), problems


def test_problems_empty_for_valid_configs():
    assert make_cfg().problems() == []
    assert make_cfg(vocab_size=0).problems() == []  # filled in later, not a problem
    assert make_cfg(n_kv_heads=2, attn_gate="headwise", norm_eps=0.0).problems() == []
    assert LlamaConfig().problems() == []
