"""WISCA transition keeps the logits exactly (MHA, GQA, MQA, gates, RoPE pairs), also under DDP."""

import copy

import pytest
import torch
import torch.distributed as dist

from lit_modules.techniques.wisca import Wisca
from lit_modules.techniques.wisca.rescales import apply_rescales, plan_qk
from tests.helpers.wisca import MODELS, attn_weights, tokens, unbalanced_model

PLANS = {
    "qk_vo_tensor": dict(qk=True, vo=True, qk_granularity="tensor", vo_granularity="tensor"),
    "qk_vo_channel": dict(qk=True, vo=True, qk_granularity="channel", vo_granularity="channel"),
    "qk_channel_vo_tensor": dict(qk=True, vo=True, qk_granularity="channel", vo_granularity="tensor"),
    "qk_tensor_only": dict(qk=True, vo=False),
    "vo_channel_only": dict(qk=False, vo=True, vo_granularity="channel"),
    "qk_vo_channel_mean": dict(qk=True, vo=True, qk_granularity="channel", vo_granularity="channel",
                               channel_reduce="mean"),
}


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
