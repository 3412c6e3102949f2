"""WISCA x PC layer x gate x GQA: accepted combinations keep the logits; the rest are refused up front."""

from __future__ import annotations

import copy
import itertools

import pytest
import torch
from omegaconf import DictConfig

from lit_modules.build import build_model, build_techniques
from lit_modules.config.composition import compose_run_config
from lit_modules.config.errors import ConfigError
from lit_modules.config.validate import validate
from lit_modules.techniques.pc_layer.parametrization import refresh_all
from lit_modules.techniques.wisca import Wisca
from tests.helpers.wisca_pc import (LOGIT_TOL, VOCAB, assert_close_up_to_rounding, check_periodic_transition,
                                    holder, tokens, unbalance)

WISCA_OPTIONS = {
    "qk_tensor": ["wisca=qk_tensor"],
    "vo_tensor": ["wisca=vo_tensor"],
    "qk_vo_tensor": ["wisca=qk_vo_tensor"],
    "qk_channel_vo_tensor": ["wisca=qk_channel_vo_tensor"],
    "qk_vo_channel": ["wisca=qk_vo_tensor", "techniques.wisca.qk_granularity=channel",
                      "techniques.wisca.vo_granularity=channel"],
    "qk_vo_tensor_init": ["wisca=qk_vo_tensor_init"],
}
ALL_TARGETS = "[q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj]"
PC_OPTIONS = {
    "none": [],
    "level2": ["pc_layer=level2"],
    "level4": ["pc_layer=level4"],
    "level4_no_gamma": ["pc_layer=level4", "techniques.pc_layer.learnable_gamma=false"],
    "level4_all_targets": ["pc_layer=level4", f"techniques.pc_layer.targets={ALL_TARGETS}"],
    "level0_all_targets": ["pc_layer=level0", f"techniques.pc_layer.targets={ALL_TARGETS}"],
    "level4_no_recover": ["pc_layer=level4", "techniques.pc_layer.recover_norm=false"],
    "level4_no_recover_ffn_only": ["pc_layer=level4", "techniques.pc_layer.recover_norm=false",
                                   "techniques.pc_layer.targets=[gate_proj,up_proj,down_proj]"],
}
# The spec, written out by hand: which combinations cannot be exact, and the weight that makes them so.
# The at-init transition counts too: it scales raw weights before the PC layer is attached, which is the
# same as scaling them after, so the map must carry the scale all the same.
CHANNEL_OPTIONS = ("qk_channel_vo_tensor", "qk_vo_channel")
VO_OPTIONS = ("vo_tensor", "qk_vo_tensor", "qk_vo_tensor_init", *CHANNEL_OPTIONS)
REFUSED = {
    **{("qk_vo_channel", pc): "o_proj" for pc in ("level2", "level4", "level4_no_gamma")},
    **{(w, "level4_all_targets"): "q_proj" for w in CHANNEL_OPTIONS},
    **{(w, "level4_no_recover"): "o_proj" for w in VO_OPTIONS},
}
GATES = ("none", "elementwise", "headwise")
KV_HEADS = {"mha": None, "gqa": 2}  # CPU-tiny: d_model 64, 4 heads of 16
VARIANTS = list(itertools.product(GATES, KV_HEADS))


def _compose(wisca: str, pc: str, gate: str = "none", kv: str = "mha") -> DictConfig:
    periodic = [] if wisca == "qk_vo_tensor_init" else ["techniques.wisca.every_n_steps=5"]
    cfg = compose_run_config([
        "model=tiny", "model.max_seq_len=32", f"model.vocab_size={VOCAB}", "regime=steps",
        "trainer.max_steps=10", "data.seq_len=32", *WISCA_OPTIONS[wisca], *PC_OPTIONS[pc], *periodic,
        "techniques.wisca.opt_state=rescale",
    ])
    return _variant(cfg, gate, kv)


def _variant(cfg: DictConfig, gate: str, kv: str) -> DictConfig:
    cfg = copy.deepcopy(cfg)
    cfg.model.attn_gate, cfg.model.n_kv_heads = gate, KV_HEADS[kv]
    return cfg


def _check_init_transition(cfg: DictConfig) -> None:
    """At init the transition runs inside build_model; the model must equal the one built without it."""
    with_wisca = build_techniques(cfg)
    without = [t for t in with_wisca if not isinstance(t, Wisca)]
    model, _ = build_model(cfg, with_wisca)
    reference, _ = build_model(cfg, without)
    for built in (model, reference):
        refresh_all(built, 10)  # as PowerIterationRefresh does at train start
    idx = tokens(0)
    with torch.no_grad():
        assert_close_up_to_rounding(model(idx), reference(idx), tol=LOGIT_TOL)


def _check_combination(base: DictConfig, wisca: str, pc: str, gate: str, kv: str) -> None:
    cfg = _variant(base, gate, kv)
    weight = REFUSED.get((wisca, pc))
    if weight is not None:
        with pytest.raises(ConfigError) as err:
            validate(cfg)
        sentences = [s for s in str(err.value).splitlines() if "WISCA" in s]
        assert any(f"rescale {weight}" in s for s in sentences) and all(s.endswith(".") for s in sentences)
        return
    cfg = validate(cfg)
    if wisca == "qk_vo_tensor_init":
        _check_init_transition(cfg)
    else:
        check_periodic_transition(cfg)


@pytest.mark.parametrize("pc", PC_OPTIONS)
@pytest.mark.parametrize("wisca", WISCA_OPTIONS)
def test_every_accepted_combination_preserves_the_logits_and_the_rest_are_refused(wisca, pc):
    """WISCA option x PC option, each on two of the six gate x GQA variants, rotated so every WISCA option
    and every PC option meets all six (the full product is the slow test below)."""
    base = _compose(wisca, pc)
    i = (list(WISCA_OPTIONS).index(wisca) + list(PC_OPTIONS).index(pc)) % 3
    for gate, kv in (VARIANTS[i], VARIANTS[i + 3]):
        _check_combination(base, wisca, pc, gate, kv)


@pytest.mark.slow
@pytest.mark.parametrize("pc", PC_OPTIONS)
@pytest.mark.parametrize("wisca", WISCA_OPTIONS)
def test_full_product_of_wisca_pc_gate_and_gqa(wisca, pc):
    base = _compose(wisca, pc)
    for gate, kv in VARIANTS:
        _check_combination(base, wisca, pc, gate, kv)


@pytest.mark.parametrize("pc, granularity", [("level4_no_recover", "tensor"), ("level4", "channel")])
def test_refused_combinations_really_break_the_function(pc, granularity):
    """The refusals are necessary: forcing WISCA's VO scale onto the raw PC weight changes the logits, while
    the same scale on the plain model (the control) keeps them."""
    idx = tokens(0)
    for pc_option, exact in ((pc, False), ("none", True)):
        cfg = _compose("qk_vo_tensor", pc_option)  # not validated: the transition is forced
        model, _ = build_model(cfg, build_techniques(cfg))
        unbalance(model, seed=3)
        refresh_all(model, 10)
        with torch.no_grad():
            before = model(idx)
            for layer in model.layers:
                attn = layer.attn
                t = 2.0 if granularity == "tensor" else torch.linspace(0.3, 3.0, attn.v_proj.out_features)
                attn.v_proj.weight.mul_(t if granularity == "tensor" else t[:, None])
                holder(attn.o_proj).mul_(1 / t if granularity == "tensor" else 1 / t[None, :])
            change = (model(idx) - before).abs().max().item()
        assert (change < 1e-4) if exact else (change > 1e-2), (pc_option, change)


def test_refusal_is_one_sentence_before_any_run(tmp_path):
    from lit_modules.train import run

    cfg = _compose("vo_tensor", "level4_no_recover")
    cfg.runs_dir = str(tmp_path)
    with pytest.raises(ConfigError) as err:
        run(cfg)
    (sentence,) = str(err.value).splitlines()
    assert sentence == (
        "WISCA's VO transition cannot rescale o_proj exactly: without norm recovery "
        "(techniques.pc_layer.recover_norm=false) the PC weight ignores any scale of its raw weight; "
        "set techniques.wisca.vo=false or keep o_proj out of techniques.pc_layer.targets."
    )
    assert not (tmp_path / "checkpoints").exists()
