"""Tests for lit_modules.model: shapes, RoPE, GQA, causality, gating, norms, counting."""

from functools import partial

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from lit_modules.model import Llama, LlamaConfig, count_parameters, flops_per_token
from lit_modules.model.mlp import SwiGLU
from lit_modules.model.norm import RMSNorm
from lit_modules.model.rope import apply_rope, precompute_rope
from tests.helpers.models import tokens as random_tokens

VOCAB = 97


def make_cfg(**overrides) -> LlamaConfig:
    base = dict(vocab_size=VOCAB, d_model=32, n_layers=2, n_heads=4, d_ff=48, max_seq_len=16)
    base.update(overrides)
    return LlamaConfig(**base)


def build(seed: int = 0, **overrides) -> Llama:
    torch.manual_seed(seed)
    return Llama(make_cfg(**overrides))


tokens = partial(random_tokens, VOCAB, length=12, seed=1)  # this file's batches: 2 x 12 ids, seed 1


# --------------------------------------------------------------------- shapes


def test_forward_shapes_and_hidden_states():
    model = build()
    idx = tokens()
    logits = model(idx)
    assert logits.shape == (2, 12, VOCAB) and logits.dtype == torch.float32
    logits2, hidden = model(idx, return_hidden=True)
    assert torch.equal(logits, logits2)
    assert len(hidden) == model.cfg.n_layers + 1
    assert all(h.shape == (2, 12, 32) for h in hidden)
    assert torch.equal(hidden[0], model.tok_emb(idx))
    assert torch.allclose(model.lm_head(model.final_norm(hidden[-1])), logits)


def test_too_long_sequence_raises():
    model = build(max_seq_len=8)
    with pytest.raises(ValueError, match="max_seq_len"):
        model(tokens(length=9))
    model(tokens(length=8))


def test_vocab_zero_raises():
    with pytest.raises(ValueError, match="vocab_size"):
        Llama(make_cfg(vocab_size=0))


def test_invalid_config_raises():
    with pytest.raises(ValueError, match="divisible"):
        Llama(make_cfg(d_model=30))


def test_accepts_omegaconf_structured_config():
    from omegaconf import OmegaConf

    cfg = OmegaConf.structured(make_cfg())
    model = Llama(cfg)
    assert isinstance(model.cfg, LlamaConfig)
    assert model(tokens()).shape == (2, 12, VOCAB)


def test_no_lightning_or_hydra_imports():
    import subprocess
    import sys

    code = (
        "import sys, lit_modules.model; "
        "bad = [m for m in ('lightning', 'pytorch_lightning', 'hydra') if m in sys.modules]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


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


# ----------------------------------------------------------------------- RoPE


def rope_reference(x: torch.Tensor, theta: float) -> torch.Tensor:
    """Independent RoPE: channel pair (j, j+hd/2) as one complex number, rotated by t*w_j."""
    T, hd = x.shape[-2], x.shape[-1]
    half = hd // 2
    x64 = x.double()
    z = torch.complex(x64[..., :half], x64[..., half:])
    w = torch.tensor([theta ** (-2.0 * j / hd) for j in range(half)], dtype=torch.float64)
    t = torch.arange(T, dtype=torch.float64)[:, None]
    z = z * torch.polar(torch.ones(T, half, dtype=torch.float64), t * w)
    return torch.cat([z.real, z.imag], dim=-1)


@pytest.mark.parametrize("theta", [10000.0, 500.0])
def test_rope_matches_complex_reference(theta):
    hd, T = 16, 10
    x = torch.randn(2, 3, T, hd)
    cos, sin = precompute_rope(hd, 32, theta)
    out = apply_rope(x, cos[:T], sin[:T])
    torch.testing.assert_close(out.double(), rope_reference(x, theta), atol=1e-5, rtol=1e-5)


def test_rope_position_zero_is_identity_and_relative():
    hd = 8
    cos, sin = precompute_rope(hd, 16)
    q, k = torch.randn(hd), torch.randn(hd)
    rot = lambda v, t: apply_rope(v.expand(16, hd), cos, sin)[t]  # noqa: E731
    assert torch.allclose(rot(q, 0), q)
    # <R_m q, R_n k> depends only on m - n.
    assert torch.allclose(rot(q, 5) @ rot(k, 2), rot(q, 9) @ rot(k, 6), atol=1e-5)


def test_rope_buffers_are_not_persistent():
    model = build()
    names = set(model.state_dict())
    assert "rope_cos" not in names and "rope_sin" not in names
    assert model.rope_cos.shape == (16, 8)


def test_rope_keeps_bf16_dtype():
    cos, sin = precompute_rope(8, 4)
    x = torch.randn(1, 1, 4, 8).bfloat16()
    assert apply_rope(x, cos, sin).dtype == torch.bfloat16


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


# -------------------------------------------------------------------- RMSNorm


def rms(t: torch.Tensor) -> torch.Tensor:
    return t.float().pow(2).mean(-1).sqrt()


def test_rmsnorm_eps_saturates_tiny_activations():
    x = torch.randn(4, 256) * 1e-4
    big_eps = RMSNorm(256, eps=1e-5)(x)
    tiny_eps = RMSNorm(256, eps=1e-12)(x)
    assert rms(big_eps).max() < 0.1  # eps dominates the 1e-8 mean square
    torch.testing.assert_close(rms(tiny_eps), torch.ones(4), atol=1e-4, rtol=0)


def test_rmsnorm_does_fp32_math_under_bf16():
    x = (torch.randn(4, 256) * 1e-4).bfloat16()
    out = RMSNorm(256, eps=1e-12)(x)
    assert out.dtype == torch.bfloat16
    # Exactly one rounding to bf16, at the end: the statistic is computed in fp32.
    x32 = x.float()
    expected = (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + 1e-12)).bfloat16()
    assert torch.equal(out, expected)
    torch.testing.assert_close(rms(out), torch.ones(4), atol=1e-2, rtol=0)
    assert rms(RMSNorm(256, eps=1e-5)(x)).max() < 0.1  # eps still honoured under bf16


def test_rmsnorm_weight_is_named_weight_and_ones():
    norm = RMSNorm(8)
    assert [n for n, _ in norm.named_parameters()] == ["weight"]
    assert torch.equal(norm.weight, torch.ones(8))


def test_model_runs_under_bf16_autocast():
    model = build()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(tokens())
    assert torch.isfinite(out.float()).all()


def test_block_param_names():
    names = {n for n, _ in build(attn_gate="elementwise").named_parameters()}
    layer = "layers.0."
    expected = {
        "attn_norm.weight", "attn.q_proj.weight", "attn.k_proj.weight", "attn.v_proj.weight",
        "attn.o_proj.weight", "attn.gate_proj.weight", "mlp_norm.weight",
        "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight",
    }
    assert {n[len(layer):] for n in names if n.startswith(layer)} == expected
    assert {"tok_emb.weight", "final_norm.weight", "lm_head.weight"} <= names
