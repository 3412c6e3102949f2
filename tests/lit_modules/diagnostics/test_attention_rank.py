"""Attention pseudo-rank: known ranks of constructed per-head products, GQA head mapping, the factor
orientation against the module's own computation, and the registered diagnostic."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from lit_modules.diagnostics import REGISTRY, DiagnosticContext
from lit_modules.diagnostics.attention_rank import (
    TAUS,
    attention_rank_metrics,
    entropy_rank,
    head_factors,
    product_singular_values,
    pseudo_rank,
    spectrum_summary,
    stable_rank_of,
)
from lit_modules.model import Llama, LlamaConfig
from lit_modules.model.attention import Attention

D, HD = 64, 16


def orthonormal(rows: int, cols: int, seed: int) -> torch.Tensor:
    q, _ = torch.linalg.qr(torch.randn(rows, cols, generator=torch.Generator().manual_seed(seed), dtype=torch.float64))
    return q


def head_weights(singular: list[float], seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(W_Q^h, W_K^h), each [HD, D], whose product W_Q^h^T W_K^h has exactly these singular values."""
    p, q = orthonormal(D, HD, seed), orthonormal(D, HD, seed + 100)
    s = torch.tensor(singular + [0.0] * (HD - len(singular)), dtype=torch.float64)
    return (p * s).T.float(), q.T.float()  # (P diag(s))^T and Q^T: product = P diag(s) Q^T


def test_products_with_known_spectra_have_known_ranks():
    spectrum = [1.0, 0.5, 0.05, 0.005]  # >= 1e-2: three values; >= 1e-3: four
    wq, wk = head_weights(spectrum, seed=0)
    singular = product_singular_values(wq.T, wk.T)
    assert singular.shape == (HD,)
    assert torch.allclose(singular[:4], torch.tensor(spectrum, dtype=torch.float64), atol=1e-6)
    assert pseudo_rank(singular, 1e-2) == 3 and pseudo_rank(singular, 1e-3) == 4
    assert stable_rank_of(singular) == pytest.approx(1 + 0.25 + 0.0025 + 0.000025, rel=1e-6)


def test_equal_singular_values_give_entropy_rank_equal_to_rank():
    for rank in (1, 3, 7, HD):
        wq, wk = head_weights([2.5] * rank, seed=rank)
        singular = product_singular_values(wq.T, wk.T)
        assert entropy_rank(singular) == pytest.approx(rank, rel=1e-6)
        assert pseudo_rank(singular, 1e-3) == rank
        assert stable_rank_of(singular) == pytest.approx(rank, rel=1e-6)


def test_zero_matrix_and_summary_keys():
    zeros = torch.zeros(HD, dtype=torch.float64)
    assert spectrum_summary(zeros) == {"pseudo_rank_tau0.01": 0.0, "pseudo_rank_tau0.001": 0.0,
                                       "entropy_rank": 0.0, "stable_rank": 0.0}
    assert TAUS == (1e-2, 1e-3)


def test_small_side_trick_matches_the_full_product():
    g = torch.Generator().manual_seed(3)
    left, right = torch.randn(D, HD, generator=g), torch.randn(D, HD, generator=g)
    full = torch.linalg.svdvals(left.double() @ right.double().T)
    small = product_singular_values(left, right)
    assert torch.allclose(small, full[:HD], rtol=1e-8, atol=1e-10)
    assert full[HD:].abs().max() < 1e-9 * full[0]  # the rest are zeros: rank <= head_dim


def gqa_attention(q_ranks: list[int], k_ranks: list[int]) -> Attention:
    """n_heads=4, n_kv_heads=2; query head h's Q has rank q_ranks[h], kv head g's K has rank k_ranks[g]."""
    attn = Attention(LlamaConfig(vocab_size=16, d_model=D, n_layers=1, n_heads=4, n_kv_heads=2, max_seq_len=8))
    with torch.no_grad():
        for h, r in enumerate(q_ranks):
            attn.q_proj.weight[h * HD:(h + 1) * HD] = head_weights([1.0] * r, seed=h)[0]
        for g, r in enumerate(k_ranks):
            attn.k_proj.weight[g * HD:(g + 1) * HD] = head_weights([1.0] * r, seed=10 + g)[0]
    return attn


def test_gqa_uses_the_kv_head_each_query_head_reads():
    # Full-rank queries; kv head 0 has rank 2, kv head 1 rank 5. Query heads 0,1 read kv 0; 2,3 read kv 1.
    attn = gqa_attention(q_ranks=[HD] * 4, k_ranks=[2, 5])
    ranks = [pseudo_rank(product_singular_values(*f["qk"]), 1e-2) for f in head_factors(attn)]
    assert ranks == [2, 2, 5, 5]  # h % n_kv_heads would give [2, 5, 2, 5]


def test_factors_match_what_the_module_computes():
    torch.manual_seed(0)
    attn = Attention(LlamaConfig(vocab_size=16, d_model=D, n_layers=1, n_heads=4, n_kv_heads=2, max_seq_len=8))
    x, x2 = torch.randn(D), torch.randn(D)
    q, k = attn.q_proj(x).view(4, HD), attn.k_proj(x2).view(2, HD)
    factors = head_factors(attn)
    for h, f in enumerate(factors):
        left, right = f["qk"]
        # Logit of query x against key x2 (no RoPE): q_h . k_g = x^T W_QK^h x2.
        assert torch.allclose(x @ (left @ right.T) @ x2, q[h] @ k[h // 2], atol=1e-4)
    # One token attends only to itself (softmax = 1; RoPE never touches v): output = sum_h W_OV^h x.
    cos, sin = torch.ones(1, HD), torch.zeros(1, HD)
    out = attn(x.view(1, 1, D), cos, sin).view(D)
    summed = sum(f["ov"][0] @ f["ov"][1].T for f in factors) @ x
    assert torch.allclose(out, summed, atol=1e-5)


def test_model_average_and_registered_diagnostic(tmp_path: Path):
    model = Llama(LlamaConfig(vocab_size=32, d_model=D, n_layers=2, n_heads=4, max_seq_len=16))
    spectra = {0: [1.0], 1: [1.0, 1.0, 1.0]}  # layer 0: rank 1 per head; layer 1: rank 3
    with torch.no_grad():
        for layer, s in spectra.items():
            attn = model.layers[layer].attn
            for h in range(4):
                wq, wk = head_weights(s, seed=20 * layer + h)
                attn.q_proj.weight[h * HD:(h + 1) * HD] = wq
                attn.k_proj.weight[h * HD:(h + 1) * HD] = wk
    metrics = attention_rank_metrics(model)
    assert metrics["attention_rank/qk/pseudo_rank_tau0.01"] == pytest.approx(2.0)  # mean of 1 and 3
    assert metrics["attention_rank/qk/entropy_rank"] == pytest.approx(2.0, rel=1e-6)
    assert metrics["attention_rank/head_dim"] == HD
    assert 1 <= metrics["attention_rank/ov/pseudo_rank_tau0.001"] <= HD  # random init: full or nearly
    result = REGISTRY["attention_rank"](DiagnosticContext(model, torch.zeros(1, 4, dtype=torch.long), 0, tmp_path))
    assert result.metrics == metrics
    assert not math.isnan(sum(result.metrics.values()))
