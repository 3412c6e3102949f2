"""Attention: GQA against MHA, causality, and the attention probabilities against SDPA."""

import pytest
import torch

from tests.helpers.tiny_llama import VOCAB, build, tokens


# ------------------------------------------------------------------------ GQA


def test_gqa_with_kv_equal_heads_is_mha():
    mha, gqa = build(seed=3), build(seed=3, n_kv_heads=4)
    assert mha.layers[0].attn.k_proj.weight.shape == gqa.layers[0].attn.k_proj.weight.shape
    gqa.load_state_dict(mha.state_dict())
    assert torch.equal(mha(tokens()), gqa(tokens()))


def test_gqa_equals_mha_with_expanded_kv_weights():
    n_heads, n_kv, hd = 4, 2, 8
    gqa = build(seed=4, n_kv_heads=n_kv)
    mha = build(seed=5)
    state = gqa.state_dict()
    for key in list(state):
        if key.endswith(("k_proj.weight", "v_proj.weight")):
            w = state[key].view(n_kv, hd, -1)  # per kv head
            state[key] = w.repeat_interleave(n_heads // n_kv, dim=0).reshape(n_heads * hd, -1)
    mha.load_state_dict(state)
    torch.testing.assert_close(gqa(tokens()), mha(tokens()), atol=1e-6, rtol=1e-6)


# ------------------------------------------------------------------ causality


@pytest.mark.parametrize("overrides", [{}, {"n_kv_heads": 2, "attn_gate": "elementwise"}])
def test_future_tokens_do_not_change_past_logits(overrides):
    model = build(**overrides)
    idx = tokens(batch=1, length=12)
    base = model(idx)
    for t in (0, 5, 11):
        changed = idx.clone()
        changed[0, t] = (changed[0, t] + 1) % VOCAB
        out = model(changed)
        torch.testing.assert_close(out[:, :t], base[:, :t], atol=1e-6, rtol=0)
        assert not torch.allclose(out[:, t], base[:, t])


# -------------------------------------------------------------- attention probs


@pytest.mark.parametrize("overrides", [{}, {"n_kv_heads": 2}])
def test_attention_probs_are_causal_distributions(overrides):
    model = build(seed=11, **overrides)
    idx = tokens(length=10)
    probs = model.attention_probs(idx)
    assert len(probs) == 2
    for p in probs:
        assert p.shape == (2, 4, 10, 10)
        torch.testing.assert_close(p.sum(-1), torch.ones(2, 4, 10))
        assert torch.all(p.triu(1) == 0)
        assert torch.all(p[..., 0, 0] == 1)


def test_attention_probs_reproduce_sdpa_output():
    model = build(seed=12, n_kv_heads=2)
    attn = model.layers[0].attn
    x = torch.randn(2, 7, 32)
    cos, sin = model.rope_cos[:7], model.rope_sin[:7]
    probs = attn.attention_probs(x, cos, sin)
    v = attn.v_proj(x).view(2, 7, 2, 8).transpose(1, 2).repeat_interleave(2, dim=1)
    y = (probs @ v).transpose(1, 2).reshape(2, 7, 32)
    torch.testing.assert_close(attn.o_proj(y), attn(x, cos, sin), atol=1e-5, rtol=1e-5)
