"""WISCA transition balances L1 norms (tensor and per KV channel), checked by independent recomputation."""

from __future__ import annotations

import math

import pytest
import torch

from lit_modules.model import Llama, LlamaConfig
from lit_modules.techniques.wisca import Wisca
from tests.helpers.wisca import MODELS, VOCAB, unbalanced_model


# ------------------------------------------------------------------ L1 balance (independent recomputation)


def _row_l1(w: torch.Tensor) -> torch.Tensor:
    return w.detach().double().abs().sum(dim=1)


@pytest.mark.parametrize("arch", ["mha", "gqa", "mqa"])
def test_tensor_level_balances_l1_exactly(arch):
    model = unbalanced_model(**MODELS[arch])
    Wisca(qk_granularity="tensor", vo_granularity="tensor").transition(model)
    for layer in model.layers:
        a = layer.attn
        l1 = {n: getattr(a, n).weight.detach().double().abs().sum().item()
              for n in ("q_proj", "k_proj", "v_proj", "o_proj")}
        assert l1["q_proj"] == pytest.approx(l1["k_proj"], rel=1e-6)
        assert l1["v_proj"] == pytest.approx(l1["o_proj"], rel=1e-6)


@pytest.mark.parametrize("reduce", ["sum", "mean"])
@pytest.mark.parametrize("arch", ["mha", "gqa", "mqa"])
def test_channel_level_balances_each_kv_channel(arch, reduce):
    """QK: for each KV head g and RoPE pair (j, j+hd/2): reduce over the group's query heads of the pair's
    q-row L1 == the pair's k-row L1. VO: for each (g, c): reduce over heads of o-column L1 == v-row L1."""
    model = unbalanced_model(**MODELS[arch])
    Wisca(qk_granularity="channel", vo_granularity="channel", channel_reduce=reduce).transition(model)
    attn = model.layers[0].attn
    H, G, hd = attn.n_heads, attn.n_kv_heads, attn.head_dim
    rep, half = H // G, hd // 2
    agg = sum if reduce == "sum" else (lambda xs: sum(xs) / len(xs))
    for layer in model.layers:
        a = layer.attn
        q, k, v = _row_l1(a.q_proj.weight), _row_l1(a.k_proj.weight), _row_l1(a.v_proj.weight)
        o = a.o_proj.weight.detach().double().abs().sum(dim=0)
        for g in range(G):
            heads = range(g * rep, (g + 1) * rep)
            for j in range(half):
                q_pair = agg([q[h * hd + j] + q[h * hd + j + half] for h in heads])
                k_pair = k[g * hd + j] + k[g * hd + j + half]
                assert q_pair.item() == pytest.approx(k_pair.item(), rel=1e-5)
            for c in range(hd):
                o_channel = agg([o[h * hd + c] for h in heads])
                assert o_channel.item() == pytest.approx(v[g * hd + c].item(), rel=1e-5)


def _constant_model(n_heads: int, n_kv_heads: int) -> Llama:
    cfg = LlamaConfig(vocab_size=VOCAB, d_model=8, n_layers=1, n_heads=n_heads, n_kv_heads=n_kv_heads, d_ff=8)
    return Llama(cfg)


def test_tensor_level_known_answer():
    """W_q = 4, W_k = 1 everywhere (same shape): a = sqrt(1/4) = 0.5, so both become 2; likewise V/O."""
    model = _constant_model(2, 2)
    a = model.layers[0].attn
    with torch.no_grad():
        for name, value in (("q_proj", 4.0), ("k_proj", 1.0), ("v_proj", 0.5), ("o_proj", 8.0)):
            getattr(a, name).weight.fill_(value)
    _, metrics = Wisca().transition(model)
    assert metrics["wisca/layer0/qk_l1_ratio"] == pytest.approx(4.0)
    assert metrics["wisca/layer0/qk_scale"] == pytest.approx(0.5)
    assert metrics["wisca/layer0/vo_l1_ratio"] == pytest.approx(1 / 16)
    assert metrics["wisca/layer0/vo_scale"] == pytest.approx(4.0)
    for name, value in (("q_proj", 2.0), ("k_proj", 2.0), ("v_proj", 2.0), ("o_proj", 2.0)):
        torch.testing.assert_close(getattr(a, name).weight, torch.full_like(a.q_proj.weight, value))


@pytest.mark.parametrize(
    "reduce, q_after, k_after",
    [("mean", (1.0, 3.0), 2.0), ("sum", (2 / math.sqrt(8), 6 / math.sqrt(8)), math.sqrt(8))],
)
def test_channel_level_known_answer(reduce, q_after, k_after):
    """GQA with 2 query heads on 1 KV head: q head 0 entries 2, head 1 entries 6, k entries 1.
    Per channel (8 inputs): q L1 = 16 and 48, k L1 = 8. mean rule: a = sqrt(8 / 32) = 1/2 -> q 1 and 3, k 2;
    sum rule: a = sqrt(8 / 64) = 1/sqrt(8) -> q 2/sqrt8 and 6/sqrt8, k sqrt8."""
    model = _constant_model(2, 1)
    a = model.layers[0].attn
    hd = a.head_dim
    with torch.no_grad():
        a.q_proj.weight[:hd].fill_(2.0), a.q_proj.weight[hd:].fill_(6.0), a.k_proj.weight.fill_(1.0)
    Wisca(vo=False, qk_granularity="channel", channel_reduce=reduce).transition(model)
    torch.testing.assert_close(a.q_proj.weight[:hd], torch.full((hd, 8), q_after[0]))
    torch.testing.assert_close(a.q_proj.weight[hd:], torch.full((hd, 8), q_after[1]))
    torch.testing.assert_close(a.k_proj.weight, torch.full((hd, 8), k_after))


def test_zero_weights_keep_scale_one():
    model = _constant_model(2, 2)
    with torch.no_grad():
        model.layers[0].attn.k_proj.weight.zero_()
    _, metrics = Wisca(vo=False).transition(model)
    assert metrics["wisca/layer0/qk_scale"] == 1.0
    assert torch.isfinite(model.layers[0].attn.q_proj.weight).all()
