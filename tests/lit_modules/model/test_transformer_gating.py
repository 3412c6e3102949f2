"""Attention output gates: none is bit-identical to an ungated model; elementwise and headwise work."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from lit_modules.model import Llama, LlamaConfig
from lit_modules.model.mlp import SwiGLU
from lit_modules.model.norm import RMSNorm
from lit_modules.model.rope import apply_rope, precompute_rope
from tests.helpers.tiny_llama import VOCAB, build, make_cfg, tokens


# --------------------------------------------------------------------- gating


class UngatedAttention(nn.Module):
    """Attention as it would be written without any gating support."""

    def __init__(self, cfg: LlamaConfig) -> None:
        super().__init__()
        self.h, self.kv, self.hd = cfg.n_heads, cfg.kv_heads, cfg.head_dim
        self.q_proj = nn.Linear(cfg.d_model, self.h * self.hd, bias=False)
        self.k_proj = nn.Linear(cfg.d_model, self.kv * self.hd, bias=False)
        self.v_proj = nn.Linear(cfg.d_model, self.kv * self.hd, bias=False)
        self.o_proj = nn.Linear(self.h * self.hd, cfg.d_model, bias=False)

    def forward(self, x, cos, sin):
        B, T, _ = x.shape
        split = lambda t, n: t.view(B, T, n, self.hd).transpose(1, 2)  # noqa: E731
        q = apply_rope(split(self.q_proj(x), self.h), cos, sin)
        k = apply_rope(split(self.k_proj(x), self.kv), cos, sin)
        v = split(self.v_proj(x), self.kv)
        if self.h != self.kv:
            k = k.repeat_interleave(self.h // self.kv, dim=1)
            v = v.repeat_interleave(self.h // self.kv, dim=1)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o_proj(y.transpose(1, 2).reshape(B, T, self.h * self.hd))


class UngatedBlock(nn.Module):
    def __init__(self, cfg: LlamaConfig) -> None:
        super().__init__()
        self.attn_norm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.attn = UngatedAttention(cfg)
        self.mlp_norm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.mlp = SwiGLU(cfg.d_model, cfg.d_ff)

    def forward(self, x, cos, sin):
        x = x + self.attn(self.attn_norm(x), cos, sin)
        return x + self.mlp(self.mlp_norm(x))


class UngatedLlama(nn.Module):
    def __init__(self, cfg: LlamaConfig) -> None:
        super().__init__()
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.layers = nn.ModuleList(UngatedBlock(cfg) for _ in range(cfg.n_layers))
        self.final_norm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        cos, sin = precompute_rope(cfg.head_dim, cfg.max_seq_len, cfg.rope_theta)
        self.cos, self.sin = cos, sin

    def forward(self, idx):
        T = idx.shape[1]
        x = self.tok_emb(idx)
        for block in self.layers:
            x = block(x, self.cos[:T], self.sin[:T])
        return self.lm_head(self.final_norm(x))


@pytest.mark.parametrize("n_kv_heads", [None, 2])
def test_gate_none_is_bit_identical_to_ungated_model(n_kv_heads):
    cfg = make_cfg(n_kv_heads=n_kv_heads, attn_gate="none")
    torch.manual_seed(7)
    model = Llama(cfg)
    torch.manual_seed(7)
    reference = UngatedLlama(cfg)
    ours, ref = dict(model.named_parameters()), dict(reference.named_parameters())
    assert ours.keys() == ref.keys()
    assert not any("attn.gate_proj" in name for name in ours)
    for name in ours:
        assert torch.equal(ours[name], ref[name]), name
    idx = tokens()
    assert torch.equal(model(idx), reference(idx))


@pytest.mark.parametrize("kind, gate_rows", [("elementwise", 32), ("headwise", 4)])
def test_gated_variants_run_and_differ(kind, gate_rows):
    plain = build(seed=8)
    gated = build(seed=8, attn_gate=kind)
    assert gated.layers[0].attn.gate_proj.weight.shape == (gate_rows, 32)
    extra = set(dict(gated.named_parameters())) - set(dict(plain.named_parameters()))
    assert extra == {f"layers.{i}.attn.gate_proj.weight" for i in range(2)}
    missing, unexpected = gated.load_state_dict(plain.state_dict(), strict=False)
    assert sorted(missing) == sorted(extra) and unexpected == []
    idx = tokens()
    out = gated(idx)
    assert out.shape == (2, 12, VOCAB) and torch.isfinite(out).all()
    assert not torch.allclose(out, plain(idx))


@pytest.mark.parametrize("kind", ["elementwise", "headwise"])
def test_zero_gate_halves_attention_output(kind):
    # sigmoid(0) = 1/2 on every channel == an ungated layer whose o_proj is halved.
    gated = build(seed=9, attn_gate=kind)
    plain = build(seed=9)
    plain.load_state_dict(gated.state_dict(), strict=False)
    with torch.no_grad():
        for g_block, p_block in zip(gated.layers, plain.layers):
            g_block.attn.gate_proj.weight.zero_()
            p_block.attn.o_proj.weight.mul_(0.5)
    torch.testing.assert_close(gated(tokens()), plain(tokens()), atol=1e-6, rtol=1e-5)


def test_gate_reads_normalized_block_input():
    model = build(seed=10, attn_gate="elementwise")
    block = model.layers[1]
    seen = {}
    block.attn.gate_proj.register_forward_hook(lambda m, inp, out: seen.update(x=inp[0]))
    block.attn_norm.register_forward_hook(lambda m, inp, out: seen.update(normed=out))
    model(tokens())
    assert torch.equal(seen["x"], seen["normed"])


def test_headwise_gate_closes_one_head():
    # A headwise gate saturated shut on head 0 makes that head's values irrelevant.
    model = build(seed=10, attn_gate="headwise")
    attn = model.layers[0].attn
    x = torch.rand(1, 6, 32) + 0.1  # positive, so a negative gate row gives a negative logit
    cos, sin = model.rope_cos[:6], model.rope_sin[:6]
    with torch.no_grad():
        attn.gate_proj.weight.zero_()
        attn.gate_proj.weight[0] = -1e4  # sigmoid(logit) == 0 for head 0
        before = attn(x, cos, sin)
        attn.v_proj.weight[:8].normal_()  # kv head 0 == query head 0 (MHA)
        after = attn(x, cos, sin)
    torch.testing.assert_close(before, after)
