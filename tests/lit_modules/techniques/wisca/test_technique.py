"""WISCA transition: exact function preservation (MHA, GQA, MQA, gated, RoPE), L1 balance, refusals, callback.

The optimizer-state policies are tested in test_opt_state.py and full training runs in
test_callback.py.
"""

from __future__ import annotations

import copy
import math
from functools import partial
from types import SimpleNamespace

import pytest
import torch
import torch.distributed as dist

from lit_modules.config import files
from lit_modules.config.errors import ConfigError
from lit_modules.config.validate import validate
from lit_modules.model import Llama, LlamaConfig
from lit_modules.model.norm import RMSNorm
from lit_modules.config import technique_context as context_module
from lit_modules.techniques.wisca import Wisca
from lit_modules.techniques.wisca.callback import WiscaTransitions
from lit_modules.techniques.wisca.technique import structure_problems
from lit_modules.techniques.wisca.rescales import apply_rescales, plan_qk
from lit_modules.config.composition import compose_run_config
from tests.helpers.models import tokens as random_tokens

VOCAB = 61

MODELS = {
    "mha": dict(n_heads=4, n_kv_heads=None),
    "gqa": dict(n_heads=8, n_kv_heads=2),
    "mqa": dict(n_heads=4, n_kv_heads=1),
    "gqa_gate_elementwise": dict(n_heads=8, n_kv_heads=2, attn_gate="elementwise"),
    "gqa_gate_headwise": dict(n_heads=8, n_kv_heads=2, attn_gate="headwise"),
}
PLANS = {
    "qk_vo_tensor": dict(qk=True, vo=True, qk_granularity="tensor", vo_granularity="tensor"),
    "qk_vo_channel": dict(qk=True, vo=True, qk_granularity="channel", vo_granularity="channel"),
    "qk_channel_vo_tensor": dict(qk=True, vo=True, qk_granularity="channel", vo_granularity="tensor"),
    "qk_tensor_only": dict(qk=True, vo=False),
    "vo_channel_only": dict(qk=False, vo=True, vo_granularity="channel"),
    "qk_vo_channel_mean": dict(qk=True, vo=True, qk_granularity="channel", vo_granularity="channel",
                               channel_reduce="mean"),
}


def unbalanced_model(seed: int = 0, **overrides) -> Llama:
    """A small model whose q/k/v/o rows (o: columns) have very different L1 norms (every scale nontrivial).

    Row magnitudes are log-uniform in [0.1, 10] independently per row, so the two channels of a RoPE pair
    differ too (needed for the pairing test to mean something).
    """
    torch.manual_seed(seed)
    cfg = dict(vocab_size=VOCAB, d_model=64, n_layers=2, d_ff=96, max_seq_len=32)
    cfg.update(overrides)
    model = Llama(LlamaConfig(**cfg))
    gen = torch.Generator().manual_seed(seed + 100)

    def spread(n: int) -> torch.Tensor:
        return 10 ** (torch.rand(n, generator=gen) * 2 - 1)

    with torch.no_grad():
        for layer in model.layers:
            attn = layer.attn
            for proj in (attn.q_proj, attn.k_proj, attn.v_proj):
                proj.weight.mul_(spread(proj.weight.shape[0])[:, None])
            attn.o_proj.weight.mul_(spread(attn.o_proj.weight.shape[1])[None, :])
            attn.q_proj.weight.mul_(3.0)  # and a global imbalance on top
    return model


tokens = partial(random_tokens, VOCAB, length=24, seed=1)  # this file's batches: 2 x 24 ids, seed 1


def attn_weights(model: Llama) -> list[dict[str, torch.Tensor]]:
    return [{n: getattr(l.attn, n).weight.detach().clone() for n in ("q_proj", "k_proj", "v_proj", "o_proj")}
            for l in model.layers]


# ------------------------------------------------------------------ function preservation


@pytest.mark.parametrize("plan", PLANS)
@pytest.mark.parametrize("arch", MODELS)
def test_logits_unchanged_and_weights_changed(arch, plan):
    model = unbalanced_model(**MODELS[arch])
    idx = tokens()
    before = model(idx)
    weights_before = attn_weights(model)
    Wisca(**PLANS[plan]).transition(model)
    after = model(idx)
    torch.testing.assert_close(after, before, rtol=1e-5, atol=1e-5)
    # The transition really moved the weights it owns (otherwise the test above proves nothing).
    changed = [not torch.allclose(w, getattr(l.attn, n).weight, rtol=1e-3)
               for l, wb in zip(model.layers, weights_before) for n, w in wb.items()]
    assert sum(changed) >= 2 * len(model.layers)


@pytest.mark.parametrize("gate", ["elementwise", "headwise"])
@pytest.mark.parametrize("granularity", ["tensor", "channel"])
def test_gate_parameters_untouched(gate, granularity):
    model = unbalanced_model(n_heads=8, n_kv_heads=2, attn_gate=gate)
    gates = [l.attn.gate_proj.weight.detach().clone() for l in model.layers]
    Wisca(qk_granularity=granularity, vo_granularity=granularity).transition(model)
    assert all(torch.equal(g, l.attn.gate_proj.weight) for g, l in zip(gates, model.layers))


def test_untied_rope_pair_scales_break_equivalence():
    """Giving channel j and its rotate-half partner j + hd/2 separate scales changes the logits a lot."""
    idx = tokens()
    untied = unbalanced_model(n_heads=4, n_kv_heads=2)
    tied = copy.deepcopy(untied)
    before = untied(idx)
    for model, rope_pairs in ((untied, False), (tied, True)):
        for layer in model.layers:
            rescales, _ = plan_qk(layer.attn, "channel", rope_pairs=rope_pairs)
            apply_rescales(rescales)
    hd = untied.cfg.head_dim
    # Untied scales really differ within pairs (so the comparison is meaningful) ...
    fresh = unbalanced_model(n_heads=4, n_kv_heads=2).layers[0].attn
    untied_q = plan_qk(fresh, "channel", rope_pairs=False)[0][0]
    per_channel = untied_q.factor.view(-1, hd)
    assert (per_channel[:, : hd // 2] - per_channel[:, hd // 2:]).abs().max() > 0.1
    # ... and break the model, while tied ones preserve it.
    assert (untied(idx) - before).abs().max() > 1e-2
    torch.testing.assert_close(tied(idx), before, rtol=1e-5, atol=1e-5)


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


# ------------------------------------------------------------------ determinism / DDP


def test_scales_are_a_deterministic_function_of_the_weights():
    """Replicas with identical weights (what DDP guarantees) compute bit-identical scales."""
    a, b = unbalanced_model(n_heads=8, n_kv_heads=2), unbalanced_model(n_heads=8, n_kv_heads=2)
    ra, _ = Wisca(qk_granularity="channel").transition(a)
    rb, _ = Wisca(qk_granularity="channel").transition(b)
    assert all(torch.equal(x.factor, y.factor) for x, y in zip(ra, rb))


def test_transition_under_initialized_process_group(tmp_path):
    """The rank-0 broadcast path runs (single-process gloo group) and keeps the model function intact."""
    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/pg", rank=0, world_size=1)
    try:
        model = unbalanced_model(n_heads=8, n_kv_heads=2)
        idx = tokens()
        before = model(idx)
        Wisca(qk_granularity="channel", vo_granularity="channel").transition(model)
        torch.testing.assert_close(model(idx), before, rtol=1e-5, atol=1e-5)
    finally:
        dist.destroy_process_group()


# ------------------------------------------------------------------ refusals


QK_NORM_SENTENCE = "not output-preserving with QK-norm"


def _with_qk_norm() -> Llama:
    model = unbalanced_model()
    model.layers[1].attn.q_norm = RMSNorm(model.cfg.head_dim)
    return model


def test_qk_norm_is_refused_for_qk_but_not_vo():
    model = _with_qk_norm()
    problems = structure_problems(model, qk=True)
    assert len(problems) == 1 and QK_NORM_SENTENCE in problems[0]
    assert structure_problems(model, qk=False) == []
    with pytest.raises(ValueError, match=QK_NORM_SENTENCE):
        Wisca(at_init=True).transform_model(model)
    Wisca(qk=False, at_init=True).transform_model(model)  # VO only stays exact


def test_problems_inspects_the_configured_model_without_building_it():
    cfg = compose_run_config(["model=small", "model.attn_gate=headwise"])  # vocab_size still 0 here
    model = context_module.meta_model(cfg)
    assert len(model.layers) == 5 and model.layers[0].attn.n_kv_heads == 2
    assert model.layers[0].attn.q_proj.weight.is_meta
    assert Wisca().problems(cfg) == []


def test_qk_norm_refused_by_problems(monkeypatch):
    monkeypatch.setattr(context_module, "meta_model", lambda cfg: _with_qk_norm())
    cfg = compose_run_config(["wisca=qk_vo_tensor"])
    assert any(QK_NORM_SENTENCE in p for p in Wisca().problems(cfg))
    assert Wisca(qk=False).problems(cfg) == []


def test_bias_and_missing_projection_refused():
    model = unbalanced_model()
    model.layers[0].attn.v_proj = torch.nn.Linear(64, 64, bias=True)
    assert "biases" in structure_problems(model, qk=True)[0]
    del model.layers[0].attn.o_proj
    assert "o_proj" in structure_problems(model, qk=True)[0]


def test_config_problems_are_reported_before_any_run():
    cfg = compose_run_config([
        "wisca=qk_vo_tensor", "techniques.wisca.qk=false", "techniques.wisca.vo=false",
        "techniques.wisca.opt_state=moments", "techniques.wisca.qk_granularity=row",
        "techniques.wisca.channel_reduce=max", "trainer.strategy=fsdp", "trainer.precision=bf16-true",
    ])
    with pytest.raises(ConfigError) as err:
        validate(cfg)
    message = str(err.value)
    expected = ("rescales nothing", "techniques.wisca.opt_state must be one of",
                "techniques.wisca.qk_granularity must be one of",
                "techniques.wisca.channel_reduce must be one of", "FSDP shards them", "no fp32 master copy")
    for sentence in expected:
        assert sentence in message
    never = Wisca(every_n_steps=0, at_init=False).knob_problems()
    assert never == ["WISCA with techniques.wisca.every_n_steps=0 and at_init=false never runs; "
                     "enable one of them."]
    assert "every_n_steps must be >= 0" in Wisca(every_n_steps=-1).knob_problems()[0]


OPTIONS = ["qk_vo_tensor", "qk_tensor", "vo_tensor", "qk_channel_vo_tensor", "qk_vo_tensor_init"]


@pytest.mark.parametrize("option", OPTIONS)
def test_every_option_validates_on_small_and_records_its_choices(option):
    cfg = validate(compose_run_config(["model=small", f"wisca={option}"]))
    from hydra.utils import instantiate

    technique = instantiate(cfg.techniques.wisca)
    tags = technique.tags()
    assert tags["wisca.opt_state"] == "keep" and tags["fidelity.wisca.opt_state"] == "assumed"
    assert ("fidelity.wisca.channel_formula" in tags) == (option == "qk_channel_vo_tensor")


# ------------------------------------------------------------------ presets


ARMS = {
    "origin": None,
    "qk_tensor": dict(qk=True, vo=False, qk_granularity="tensor", every_n_steps=50, at_init=False),
    "vo_tensor": dict(qk=False, vo=True, vo_granularity="tensor", every_n_steps=50, at_init=False),
    "qk_vo_tensor": dict(qk=True, vo=True, qk_granularity="tensor", vo_granularity="tensor", every_n_steps=50),
    "qk_channel_vo_tensor": dict(qk=True, vo=True, qk_granularity="channel", vo_granularity="tensor",
                          every_n_steps=50),
    "qk_vo_tensor_init": dict(qk=True, vo=True, every_n_steps=0, at_init=True),
}


def test_experiment_preset_lists_the_paper_rows():
    from omegaconf import OmegaConf

    spec = OmegaConf.load(files.option_path("experiment", "wisca"))
    params = spec.hydra.sweeper.params
    assert params["+arm"].split(",") == [f"wisca/{a}" for a in ARMS]
    assert str(params.seed) == "0,1,2"


@pytest.mark.parametrize("arm", ARMS)
def test_experiment_arms_compose(arm):
    cfg = compose_run_config(["experiment=wisca", f"+arm=wisca/{arm}"])
    assert cfg.model.name == "small" and cfg.trainer.max_steps == 300 and cfg.ablation.arm == arm
    node = cfg.techniques.get("wisca")
    if ARMS[arm] is None:
        assert node is None
    else:
        for key, value in ARMS[arm].items():
            assert node[key] == value, key


# ------------------------------------------------------------------ the callback


class _Logger:
    def __init__(self):
        self.calls: list[tuple[dict, int]] = []

    def log_metrics(self, metrics, step):
        self.calls.append((dict(metrics), step))


def _fake_trainer(step: int, logger: _Logger, optimizers=()) -> SimpleNamespace:
    return SimpleNamespace(global_step=step, logger=logger, optimizers=list(optimizers))


def test_callback_transitions_every_n_steps_once_per_step():
    model = unbalanced_model()
    module = SimpleNamespace(model=model)
    technique = Wisca(every_n_steps=5)
    callback, logger = technique.callbacks()[0], _Logger()
    idx = tokens()
    before = model(idx)
    for step in (0, 1, 4, 5, 5, 6, 10, 10):  # repeated steps = gradient-accumulation micro-batches
        callback.on_train_batch_end(_fake_trainer(step, logger), module, None, None, 0)
    assert callback.transitions == 2
    assert [(c[0]["wisca/transitions"], c[1]) for c in logger.calls] == [(1.0, 4), (2.0, 9)]
    assert {"wisca/layer0/qk_l1_ratio", "wisca/layer1/vo_scale"} <= set(logger.calls[0][0])
    assert logger.calls[0][0]["wisca/layer0/qk_l1_ratio"] != pytest.approx(1.0)
    assert logger.calls[1][0]["wisca/layer0/qk_l1_ratio"] == pytest.approx(1.0)  # balanced by the first
    torch.testing.assert_close(model(idx), before, rtol=1e-5, atol=1e-5)

    # A resumed run restores the count and the last step, so step 10 is not transitioned again.
    resumed = WiscaTransitions(technique)
    resumed.load_state_dict(callback.state_dict())
    resumed.on_train_batch_end(_fake_trainer(10, logger), module, None, None, 0)
    resumed.on_train_start(_fake_trainer(10, logger), module)
    assert resumed.transitions == 2 and len(logger.calls) == 2


def test_init_transition_in_transform_model_is_logged_at_step_zero():
    model = unbalanced_model()
    idx = tokens()
    before = model(idx)
    technique = Wisca(every_n_steps=0, at_init=True)
    assert technique.transform_model(model) is model
    torch.testing.assert_close(model(idx), before, rtol=1e-5, atol=1e-5)
    callback, logger = technique.callbacks()[0], _Logger()
    callback.on_train_start(_fake_trainer(0, logger), SimpleNamespace(model=model))
    (metrics, step), = logger.calls
    assert step == 0 and metrics["wisca/transitions"] == 1.0 and metrics["wisca/layer0/qk_l1_ratio"] > 2
    for s in (250, 500):  # never periodic
        callback.on_train_batch_end(_fake_trainer(s, logger), SimpleNamespace(model=model), None, None, 0)
    assert callback.transitions == 1 and len(logger.calls) == 1


def test_without_at_init_transform_model_is_identity():
    model = unbalanced_model()
    weights = attn_weights(model)
    Wisca(at_init=False).transform_model(model)
    for layer, before in zip(model.layers, weights):
        assert all(torch.equal(w, getattr(layer.attn, n).weight) for n, w in before.items())
