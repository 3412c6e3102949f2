"""The mixture-of-experts FFN: deterministic routing, the load-balancing loss on known cases, the block against
a per-token reference, active-parameter counts and FLOPs against torch.utils.flop_counter, init, and the loss
term reaching the training objective."""

from __future__ import annotations

from functools import partial

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from lit_modules.diagnostics.expert_load import expert_load, load_stats
from lit_modules.diagnostics.registry import DiagnosticContext
from lit_modules.model import InitConfig, Llama, LlamaConfig, count_parameters, flops_per_token, init_weights
from lit_modules.model.moe import MoE, load_balancing_loss
from lit_modules.optim.param_groups import build_group_specs
from tests.helpers.models import tokens as random_tokens

VOCAB = 61


def moe_model(seed: int = 0, **overrides) -> Llama:
    params = dict(vocab_size=VOCAB, d_model=32, n_layers=2, n_heads=4, d_ff=48, max_seq_len=16, n_experts=4,
                  experts_top_k=2, expert_d_ff=24)
    params.update(overrides)
    model = Llama(LlamaConfig(**params))
    init_weights(model, InitConfig(std=0.1), generator=torch.Generator().manual_seed(seed))
    return model


tokens = partial(random_tokens, VOCAB, length=12, seed=1)  # this file's batches: 2 x 12 ids, seed 1


def routes(model: Llama, x: torch.Tensor) -> list[torch.Tensor]:
    chosen = []
    hooks = [b.mlp.register_forward_hook(lambda m, i, o: chosen.append(m.route(i[0].reshape(-1, i[0].shape[-1]))[1]))
             for b in model.layers]
    with torch.no_grad():
        model(x)
    for h in hooks:
        h.remove()
    return chosen


def test_routing_is_deterministic_for_a_seed():
    x = tokens()
    a, b, c = routes(moe_model(0), x), routes(moe_model(0), x), routes(moe_model(1), x)
    assert all(torch.equal(p, q) for p, q in zip(a, b))
    assert not all(torch.equal(p, q) for p, q in zip(a, c))
    with torch.no_grad():
        assert torch.equal(moe_model(0)(x), moe_model(0)(x))


def test_load_balancing_loss_on_known_cases():
    probs = torch.tensor([[0.9, 0.1], [0.2, 0.8]])
    # Balanced dispatch f = (1/2, 1/2), P = (0.55, 0.45): 2 * (0.5 * 0.55 + 0.5 * 0.45) = 1.
    assert float(load_balancing_loss(probs, torch.tensor([[0], [1]]), 2)) == pytest.approx(1.0)
    # Everything to expert 0: f = (1, 0): 2 * 0.55 = 1.1.
    assert float(load_balancing_loss(probs, torch.tensor([[0], [0]]), 2)) == pytest.approx(1.1)
    # Uniform router (zero weights): every token picks the same two of 4 tied experts; f = two halves, P = 1/4.
    block = MoE(8, 16, n_experts=4, top_k=2, aux_coef=0.5)
    with torch.no_grad():
        block.router.weight.zero_()
        block(torch.randn(3, 5, 8))
    assert float(block.aux_loss) == pytest.approx(0.5 * 4 * (0.5 * 0.25 + 0.5 * 0.25))
    assert sorted(block.load.tolist()) == [0.0, 0.0, 0.5, 0.5]
    stats = load_stats(block.load)
    assert stats["max_share"] == 0.5 and stats["entropy"] == pytest.approx(0.5)


@pytest.mark.parametrize("shared, k", [(False, 2), (True, 2), (False, 1), (True, 1)])
def test_the_block_equals_a_per_token_reference(shared, k):
    """k >= 2: the chosen probabilities renormalized (Mixtral); k = 1: the probability itself (Switch)."""
    torch.manual_seed(0)
    block = MoE(8, 16, n_experts=4, top_k=k, shared_expert=shared)
    x = torch.randn(2, 5, 8)
    flat = x.reshape(-1, 8)
    probs = torch.softmax(block.router(flat), dim=-1)
    expected = []
    for t in range(flat.shape[0]):
        top = probs[t].topk(k)
        weights = top.values / top.values.sum() if k > 1 else top.values
        y = sum(w * block.experts[int(e)](flat[t]) for w, e in zip(weights, top.indices))
        expected.append(y + (block.shared(flat[t]) if shared else 0))
    with torch.no_grad():
        torch.testing.assert_close(block(x).reshape(-1, 8), torch.stack(expected).detach(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_the_router_learns_from_the_task_loss_at_every_k(k):
    """With the balancing loss off, the language-model loss alone reaches the router at every k (at k = 1 a
    renormalized weight is exactly 1, and the router's gradient was ~1e-9: it could only learn to balance)."""
    model = moe_model(experts_top_k=k, moe_aux_coef=0.0)
    x = tokens(length=13)
    loss = torch.nn.functional.cross_entropy(model(x[:, :-1]).reshape(-1, VOCAB), x[:, 1:].reshape(-1))
    loss.backward()
    norms = [float(block.mlp.router.weight.grad.norm()) for block in model.layers]
    assert min(norms) > 1e-3, norms  # measured 0.036-0.10 for k = 1..4


def test_the_balancing_loss_counts_slots_or_tokens():
    """`slots` (default): f_e = count / (N k); `tokens`: count / N, k times larger (the same at k = 1)."""
    probs = torch.tensor([[0.5, 0.3, 0.2], [0.1, 0.6, 0.3]])
    chosen = torch.tensor([[0, 1], [1, 2]])  # f by slots = (1/4, 2/4, 1/4); by tokens (1/2, 2/2, 1/2)
    P = probs.mean(dim=0)
    slots = 3 * float((torch.tensor([0.25, 0.5, 0.25]) * P).sum())
    assert float(load_balancing_loss(probs, chosen, 3)) == pytest.approx(slots)
    assert float(load_balancing_loss(probs, chosen, 3, "tokens")) == pytest.approx(2 * slots)
    assert float(load_balancing_loss(probs, chosen[:, :1], 3, "tokens")) == pytest.approx(
        float(load_balancing_loss(probs, chosen[:, :1], 3, "slots")))
    # The model's summed loss at k = 2: the same routing, twice the loss.
    x = tokens()
    assert float(_aux(moe_model(moe_aux_load="tokens"), x)) == pytest.approx(2 * float(_aux(moe_model(), x)))
    assert LlamaConfig(n_experts=4, moe_aux_load="share").problems() == [
        "moe_aux_load must be one of ('slots', 'tokens'), got 'share'."]


def _aux(model: Llama, x: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        model(x)
    return model.aux_losses()["moe_aux"]


def test_active_parameters_count_top_k_experts():
    model = moe_model(shared_expert=True)
    counts = count_parameters(model)
    d, L, e_ff = 32, 2, 24
    expert = 3 * d * e_ff
    assert counts["non_embedding"] - counts["active_non_embedding"] == L * (4 - 2) * expert
    assert counts["active"] - counts["active_non_embedding"] == counts["embedding"]
    dense = count_parameters(Llama(LlamaConfig(vocab_size=VOCAB, d_model=32, n_layers=2, n_heads=4, d_ff=48)))
    assert dense["active"] == dense["total"] and dense["active_non_embedding"] == dense["non_embedding"]


@pytest.mark.parametrize("overrides", [{}, {"shared_expert": True, "experts_top_k": 1}, {"n_kv_heads": 2}])
def test_flops_per_token_count_the_active_experts(overrides):
    T = 16
    model = moe_model(**overrides)
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        model(tokens(batch=1, length=T)).float().sum().backward()
    measured = counter.get_total_flops()
    analytic = flops_per_token(model.cfg, T)
    assert abs(analytic["total"] * T - measured) / measured < 0.02


def test_the_aux_loss_reaches_the_training_objective():
    from lit_modules.lm_module import CausalLMModule

    model = moe_model()
    module = CausalLMModule(model, optimizer_factory=None, schedule_factory=None)
    x = tokens()
    objective, loss, terms = module.training_objective((x[:, :-1], x[:, 1:]))
    assert set(terms) == {"moe_aux"} and float(terms["moe_aux"].detach()) > 0
    torch.testing.assert_close(objective, loss + terms["moe_aux"])
    expected = sum(b.mlp.aux_loss for b in model.layers)
    torch.testing.assert_close(terms["moe_aux"], expected)
    dense = CausalLMModule(Llama(LlamaConfig(vocab_size=VOCAB)), optimizer_factory=None, schedule_factory=None)
    objective, loss, terms = dense.training_objective((x[:, :-1], x[:, 1:]))
    assert terms == {} and objective is loss


def test_router_and_experts_are_families_and_init_knobs():
    model = moe_model(shared_expert=True)
    families = {s.family for s in build_group_specs(model, "none")}
    assert {"router", "experts", "mlp"} <= families  # the shared expert is mlp
    small = Llama(model.cfg)
    init_weights(small, InitConfig(rule="fan_in_power", gamma=1.0, router_std=0.0), torch.Generator().manual_seed(0))
    assert torch.count_nonzero(small.layers[0].mlp.router.weight) == 0
    down = small.layers[0].mlp.experts[3].down_proj.weight
    assert down.std().item() == pytest.approx(24 ** -1.0, rel=0.15)  # each expert matrix: its own fan-in ** -gamma


def test_expert_load_diagnostic_reports_every_layer():
    model = moe_model()
    result = expert_load(DiagnosticContext(model, tokens(), 0, None))
    assert {"expert_load/layer0/max_share", "expert_load/layer1/cv", "expert_load/entropy", "expert_load/aux"} <= set(
        result.metrics)
    assert expert_load(DiagnosticContext(Llama(LlamaConfig(vocab_size=VOCAB)), tokens(), 0, None)).metrics == {}
