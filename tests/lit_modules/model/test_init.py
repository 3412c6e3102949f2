"""Tests for lit_modules.model.init: per-matrix std under each rule and knob."""

import glob
import math

import pytest
import torch
from omegaconf import OmegaConf
from torch import nn

from lit_modules.model import InitConfig, Llama, LlamaConfig, init_weights
from tests.helpers.runs import REPO

ROOT = REPO
D, F_, H, KV, L, V = 128, 384, 4, 2, 2, 512


def model(**overrides) -> Llama:
    base = dict(
        vocab_size=V, d_model=D, n_layers=L, n_heads=H, n_kv_heads=KV, d_ff=F_,
        max_seq_len=16, attn_gate="elementwise",
    )
    base.update(overrides)
    torch.manual_seed(0)
    return Llama(LlamaConfig(**base))


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# Fan-in of each matrix family in the model above.
FAN_IN = {
    "attn.q_proj": D, "attn.k_proj": D, "attn.v_proj": D, "attn.o_proj": D,
    "attn.gate_proj": D, "mlp.gate_proj": D, "mlp.up_proj": D, "mlp.down_proj": F_,
}


def family(name: str) -> str:
    if name in ("tok_emb.weight", "lm_head.weight"):
        return name.split(".")[0]
    return ".".join(name.split(".")[2:4])


@pytest.mark.parametrize("gamma", [0.5, 1.0])
def test_fan_in_power_std_per_matrix_family(gamma):
    m = model()
    stds = init_weights(m, InitConfig(rule="fan_in_power", gamma=gamma), generator=gen())
    families = {family(n) for n in stds}
    assert families == set(FAN_IN) | {"tok_emb", "lm_head"}
    params = dict(m.named_parameters())
    for name, measured in stds.items():
        fan_in = FAN_IN.get(family(name), D)  # embedding and head use d_in = d_model
        target = fan_in ** -gamma
        assert abs(measured / target - 1) < 0.04, (name, measured, target)
        assert measured == pytest.approx(params[name].std().item(), rel=1e-6)
        assert abs(params[name].mean().item()) < 0.1 * target


def test_fixed_rule_and_norm_weights():
    m = model()
    with torch.no_grad():
        for name, p in m.named_parameters():
            if p.ndim == 1:
                p.fill_(3.0)
    stds = init_weights(m, InitConfig(rule="fixed", std=0.05), generator=gen())
    assert all(abs(s / 0.05 - 1) < 0.04 for s in stds.values()), stds
    for name, p in m.named_parameters():
        if p.ndim == 1:
            assert torch.equal(p, torch.ones_like(p)), name


def test_depth_scaled_rule():
    m = model(n_layers=4)
    stds = init_weights(m, InitConfig(rule="depth_scaled", std=0.02), generator=gen())
    for name, measured in stds.items():
        output_proj = name.endswith(("o_proj.weight", "down_proj.weight"))
        target = 0.02 / math.sqrt(2 * 4) if output_proj else 0.02
        assert abs(measured / target - 1) < 0.04, (name, measured, target)


def test_embedding_knobs():
    m = model()
    before = m.tok_emb.weight.detach().clone()
    stds = init_weights(m, InitConfig(rule="fan_in_power", gamma=1.0, emb="none"), generator=gen())
    assert torch.equal(m.tok_emb.weight, before)  # PyTorch default N(0, 1) kept
    assert abs(stds["tok_emb.weight"] - 1.0) < 0.04
    stds = init_weights(m, InitConfig(emb="fixed", emb_std=0.3), generator=gen())
    assert abs(stds["tok_emb.weight"] / 0.3 - 1) < 0.04
    stds = init_weights(m, InitConfig(rule="depth_scaled", std=0.01), generator=gen())
    assert abs(stds["tok_emb.weight"] / 0.01 - 1) < 0.04


def test_head_knobs():
    m = model()
    stds = init_weights(m, InitConfig(rule="fan_in_power", gamma=1.0, head="d_model_rsqrt"), generator=gen())
    assert abs(stds["lm_head.weight"] / D**-0.5 - 1) < 0.04
    stds = init_weights(m, InitConfig(rule="fixed", std=0.01, head="same_rule"), generator=gen())
    assert abs(stds["lm_head.weight"] / 0.01 - 1) < 0.04


def test_tied_embeddings_follow_emb_rule():
    m = model(tie_embeddings=True)
    stds = init_weights(m, InitConfig(emb="fixed", emb_std=0.1, head="d_model_rsqrt"), generator=gen())
    assert "lm_head.weight" not in stds
    assert abs(stds["tok_emb.weight"] / 0.1 - 1) < 0.04
    assert m.lm_head.weight is m.tok_emb.weight


def test_every_2d_weight_is_reported():
    m = model()
    stds = init_weights(m, InitConfig(), generator=gen())
    assert set(stds) == {n for n, p in m.named_parameters() if p.ndim == 2}


def test_generator_makes_init_reproducible():
    a, b, c = model(), model(), model()
    cfg = InitConfig(rule="fan_in_power")
    init_weights(a, cfg, generator=gen(1))
    init_weights(b, cfg, generator=gen(1))
    init_weights(c, cfg, generator=gen(2))
    sa, sb, sc = a.state_dict(), b.state_dict(), c.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert not torch.equal(sa["layers.0.attn.q_proj.weight"], sc["layers.0.attn.q_proj.weight"])


def test_unknown_parameter_is_refused():
    m = model()
    m.layers[0].attn.q_proj.bias = nn.Parameter(torch.zeros(D))
    with pytest.raises(ValueError, match="no rule"):
        init_weights(m, InitConfig())


def test_invalid_config_is_refused():
    with pytest.raises(ValueError, match="rule"):
        init_weights(model(), InitConfig(rule="xavier"))


@pytest.mark.parametrize(
    "overrides, fragment",
    [
        (dict(rule="xavier"), "rule"),
        (dict(emb="zero"), "emb must"),
        (dict(head="tied"), "head must"),
        (dict(std=0.0), "std must"),
        (dict(std=-0.02), "std must"),
        (dict(emb_std=0.0), "emb_std"),
        (dict(gamma=-0.5), "gamma"),
    ],
)
def test_problems_catch_bad_init_configs(overrides, fragment):
    problems = InitConfig(**overrides).problems()
    assert any(fragment in p for p in problems), problems


def test_init_presets_load_into_schema():
    files = sorted(glob.glob(str(ROOT / "conf/init/*.yaml")))
    names = {f.split("/")[-1] for f in files}
    assert {"default.yaml", "depth_scaled.yaml", "gamma.yaml", "small.yaml"} <= names
    loaded = {}
    for f in files:
        cfg = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(InitConfig), OmegaConf.load(f)))
        assert cfg.problems() == [], f
        loaded[f.split("/")[-1]] = cfg
    assert loaded["default.yaml"] == InitConfig(rule="fixed", std=0.02)
    assert loaded["small.yaml"].rule == "fan_in_power" and loaded["small.yaml"].gamma == 1.0
    assert loaded["gamma.yaml"].rule == "fan_in_power" and loaded["gamma.yaml"].gamma == 0.5
    assert loaded["depth_scaled.yaml"].rule == "depth_scaled"
