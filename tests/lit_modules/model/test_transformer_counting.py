"""Parameter and FLOP counting (tied embeddings included) against hand counts and torch's FlopCounterMode."""

import pytest
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from lit_modules.model import count_parameters, flops_per_token
from tests.helpers.tiny_llama import VOCAB, build, tokens


# ---------------------------------------------------------------------- tying


def test_tied_head_shares_storage():
    model = build(tie_embeddings=True)
    assert model.lm_head.weight is model.tok_emb.weight
    assert model.lm_head.weight.data_ptr() == model.tok_emb.weight.data_ptr()
    untied = build(tie_embeddings=False)
    assert untied.lm_head.weight.data_ptr() != untied.tok_emb.weight.data_ptr()
    counts = count_parameters(model)
    assert counts["embedding"] == VOCAB * 32
    assert counts["total"] == count_parameters(untied)["total"] - VOCAB * 32


# ------------------------------------------------------------------- counting


def test_parameter_counts_match_hand_count():
    # d=32, L=2, H=4, kv=2 (hd=8), F=48, V=97, untied.
    model = build(n_kv_heads=2)
    d, L, F_, V, hd = 32, 2, 48, VOCAB, 8
    attn = d * 4 * hd + 2 * d * 2 * hd + 4 * hd * d  # q, k, v, o
    mlp = 3 * d * F_
    norms = 2 * d
    non_embedding = L * (attn + mlp + norms) + d  # + final norm
    embedding = 2 * V * d
    assert count_parameters(model) == {
        "total": non_embedding + embedding,
        "embedding": embedding,
        "non_embedding": non_embedding,
        "active": non_embedding + embedding,  # dense: a token uses every weight
        "active_non_embedding": non_embedding,
    }
    elementwise = build(attn_gate="elementwise")
    headwise = build(attn_gate="headwise")
    plain = count_parameters(build())["non_embedding"]
    assert count_parameters(elementwise)["non_embedding"] == plain + L * d * 4 * hd
    assert count_parameters(headwise)["non_embedding"] == plain + L * d * 4


@pytest.mark.parametrize(
    "overrides",
    [{}, {"n_kv_heads": 2, "attn_gate": "elementwise"}, {"attn_gate": "headwise", "tie_embeddings": True}],
)
def test_flops_per_token_matches_flop_counter(overrides):
    T = 16
    model = build(**overrides)
    idx = tokens(batch=1, length=T)
    # The math SDPA backend decomposes into bmm, which FlopCounterMode counts
    # (the fused CPU kernel is invisible to it).
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        model(idx).float().sum().backward()
    measured = counter.get_total_flops()
    analytic = flops_per_token(model.cfg, T)
    assert analytic["total"] == analytic["dense"] + analytic["head"] + analytic["attention"]
    assert analytic["head"] == 6 * 32 * VOCAB
    assert analytic["attention"] == 12 * 2 * 4 * 8 * T
    assert abs(analytic["total"] * T - measured) / measured < 0.02
