"""The model ladder (lit_modules/config/ladder.py, conf/ladder/cpu.yaml): the rule's shapes and parameter counts
by hand, the ladder's reach, a rung as a model option, and one arm composed at two rungs."""

from __future__ import annotations

import pytest
import torch
from omegaconf import OmegaConf

from lit_modules.config.composition import compose_run_config
from lit_modules.config.errors import ConfigError
from lit_modules.config.identity import identity_of
from lit_modules.config.ladder import arm_at_rung, ladder_tokens, load_ladder, make_rung, split_rung
from lit_modules.config.validate import validated
from lit_modules.model import Llama, count_parameters
from lit_modules.tracking import repro
from tests.helpers.data import assert_one_sentence


def test_two_rungs_shapes_and_counts_by_hand():
    ladder = load_ladder()
    l2, l6 = ladder.rung("l2"), ladder.rung("l6")
    # l2: 2 blocks, 2 heads of 16 -> d 32, d_ff 96. Per block: q,k,v,o 4 x 32 x 32 = 4,096; SwiGLU
    # 3 x 32 x 96 = 9,216; two norms 64 -> 13,376; x 2 = 26,752; final norm 32 -> 26,784 (tiny_quarter's).
    assert (l2.n_layers, l2.n_heads, l2.d_model, l2.d_ff) == (2, 2, 32, 96)
    assert l2.params_non_embedding == 2 * (4 * 32 * 32 + 3 * 32 * 96 + 2 * 32) + 32 == 26_784
    # l6: 6 blocks, 6 heads of 16 -> d 96, d_ff 288. Per block 36,864 + 82,944 + 192 = 119,999 + 1 = 120,000;
    # x 6 = 720,000; final norm 96 -> 720,096.
    assert (l6.n_layers, l6.n_heads, l6.d_model, l6.d_ff) == (6, 6, 96, 288)
    assert 4 * 96 * 96 + 3 * 96 * 288 + 2 * 96 == 120_000
    assert l6.params_non_embedding == 6 * 120_000 + 96 == 720_096
    # 20 tokens per parameter of the plain rung.
    assert ladder_tokens("l2", 20) == 535_680 and ladder_tokens("l6", 140) == 100_813_440


@pytest.mark.parametrize("name", [r.name for r in load_ladder().rungs])
def test_every_rung_builds_with_the_counted_shapes(name):
    rung = load_ladder().rung(name)
    cfg = rung.model_config()
    cfg.vocab_size = 259
    assert cfg.problems() == []
    with torch.device("meta"):
        model = Llama(cfg)
    assert count_parameters(model)["non_embedding"] == rung.params_non_embedding
    block = model.layers[0]
    assert tuple(block.attn.q_proj.weight.shape) == (rung.d_model, rung.d_model)
    assert tuple(block.mlp.up_proj.weight.shape) == (rung.d_ff, rung.d_model)
    assert len(model.layers) == rung.n_layers


def test_the_ladder_reaches_what_the_evidence_needs():
    ladder = load_ladder()
    assert len(ladder.rungs) >= 4
    assert ladder.span >= 16
    assert len({r.n_layers for r in ladder.rungs}) >= 3
    assert ladder.rung(ladder.headline).n_layers >= 4
    sizes = [r.params_non_embedding for r in ladder.rungs]
    assert sizes == sorted(sizes) and len(set(sizes)) == len(sizes)
    # depth and width grow together: every larger rung is deeper and wider
    assert all(a.n_layers < b.n_layers and a.d_model < b.d_model for a, b in zip(ladder.rungs, ladder.rungs[1:]))


def test_the_rule_is_the_only_source_of_the_sizes():
    assert make_rung("x", 5, head_dim=16, ffn_ratio=3, max_seq_len=256).d_model == 80
    assert make_rung("x", 5, head_dim=8, ffn_ratio=4, max_seq_len=256).d_ff == 160


def _cell(arm_option: str, rung: str, arm_name: str):
    overrides = ["experiment=evidence/small_init", *arm_at_rung(arm_option, rung, arm_name),
                 "regime.tokens='${ladder_tokens:${model.name},20}'", "seed=0"]
    return validated(compose_run_config(overrides))


def test_one_arm_file_composes_at_two_rungs():
    """The gated recipe arm of small init, one arm file, at the smallest and the largest rung: the rung gives
    the size, the arm its technique (the gate, eps, gamma), the budget is 20 x the plain rung."""
    small, large = (_cell("small_init/small_eps_gate", rung, "small_eps_gate") for rung in ("l2", "l6"))
    for checked, (layers, width, tokens) in ((small, (2, 32, 535_680)), (large, (6, 96, 14_401_920))):
        cfg = checked.config
        assert (cfg.model.n_layers, cfg.model.d_model, cfg.model.n_heads) == (layers, width, layers)
        assert cfg.model.attn_gate == "elementwise" and cfg.model.norm_eps == 1e-12  # the arm's technique
        assert cfg.init.gamma == 1.0
        assert cfg.regime.tokens == tokens
        assert checked.budget.total_tokens == tokens // 2048 * 2048
    assert small.config.ablation.arm == "small_eps_gate@l2" and large.config.ablation.arm == "small_eps_gate@l6"
    # the gate's weights are counted but do not change the budget: the reference trains on the same tokens
    reference = _cell("small_init/baseline", "l6", "baseline")
    assert reference.budget.total_tokens == large.budget.total_tokens
    assert reference.budget.params_non_embedding < large.budget.params_non_embedding
    hashes = {repro.config_hash(identity_of(OmegaConf.to_container(c.config, resolve=True)))
              for c in (small, large, reference)}
    assert len(hashes) == 3


def test_a_rung_is_a_model_option_like_any_preset():
    cfg = compose_run_config(["model=ladder/l4"])
    assert (cfg.model.name, cfg.model.n_layers, cfg.model.d_model, cfg.model.d_ff) == ("l4", 4, 64, 192)


def test_unknown_rung_is_refused_in_one_sentence():
    with pytest.raises(ConfigError) as refused:
        arm_at_rung("small_init/baseline", "l9", "baseline")
    assert_one_sentence(str(refused.value))
    assert "l9" in str(refused.value) and "l2, l3, l4, l6" in str(refused.value)
    with pytest.raises(ConfigError):
        compose_run_config(["model=ladder/l9"])


def test_split_rung():
    assert split_rung("small_eps_gate@l6") == ("small_eps_gate", "l6")
    assert split_rung("baseline@lr3e-3") == ("baseline@lr3e-3", None)
    assert split_rung("baseline@x4") == ("baseline@x4", None)
    assert split_rung("baseline") == ("baseline", None)


def test_ladder_tokens_of_a_model_option_counts_its_plain_shape_from_the_file() -> None:
    """Under a GPU recipe an arm's `${ladder_tokens:${model.name},1.3}` names the recipe's model: its budget is the
    ratio times that model's non-embedding count, by hand from its shape (and the count its file's header states)."""
    from lit_modules.config.ladder import ladder_tokens, option_params_non_embedding

    d, layers, d_ff = 1024, 16, 2816   # conf/model/llama_271m.yaml: MHA
    assert option_params_non_embedding("llama_271m") == layers * (4 * d * d + 3 * d * d_ff + 2 * d) + d == 205_554_688
    assert ladder_tokens("llama_271m", 1.3) == int(1.3 * 205_554_688)
    assert ladder_tokens("l4", 20) == 20 * 213_568
    with pytest.raises(ConfigError, match="There is no rung 'l5'"):
        ladder_tokens("l5", 20)
