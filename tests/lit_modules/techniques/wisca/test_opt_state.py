"""WISCA optimizer-state policies (keep | rescale | reset) for AdamW, Muon and the Muon+AdamW composite, NAdam and
LAMB (Adam-mini: keep only, the others refused before the first step).

The property `rescale` guarantees, stated precisely (W' = S * W elementwise, S > 0 scalar/row/column):

  (P0, the premise) the gradient in the new coordinates is g' = g / S (chain rule; checked on the real model).
  (P1) After `rescale`, the optimizer state is exactly the state the same optimizer would hold had it run in
       the new coordinates from the start and seen the same function-space gradients (g_i / S): m' = m / S,
       v' = v / S^2, step unchanged. Hence every later update of W' is the one that optimizer would make.
  (P2) AdamW, eps = 0, no weight decay: the next update of W' is, entry by entry, exactly the update the
       unscaled run makes to W (Adam's normalized direction m/sqrt(v) is invariant under the map). So in the
       ORIGINAL parametrization the rescaled model moves by dW / S, not by dW: Adam is not
       reparametrization-invariant, and no state policy can make it so. With `keep`, (P2) fails.
  (P3) Muon with a scalar S: the next update of W' equals the unscaled update of W (Newton-Schulz normalizes
       the scale away); a power of two keeps this bit-exact through Muon's bf16 iteration.
`reset` zeroes the rescaled weights' moments and keeps `step`; `keep` changes nothing.
"""

from __future__ import annotations

import copy
from functools import partial

import pytest
import torch
import torch.nn.functional as F
from omegaconf import OmegaConf

from lit_modules.config.errors import ConfigError
from lit_modules.optim.registry import optimizer_specs
from lit_modules.model import Llama, LlamaConfig
from lit_modules.optim.build import build_optimizer
from lit_modules.optim.lamb import Lamb
from lit_modules.techniques.wisca import Wisca
from lit_modules.techniques.wisca.rescales import Rescale
from lit_modules.techniques.wisca.opt_state import (COUNTER_KEYS, FIRST_MOMENT_KEYS, OPT_STATE_POLICIES,
                                                    apply_opt_state_policy, leaf_optimizers)

SHAPE = (6, 4)
BETAS = (0.9, 0.95)


def _factor(kind: str) -> torch.Tensor:
    g = torch.Generator().manual_seed(7)
    if kind == "scalar":
        return torch.tensor(3.7)
    if kind == "rows":
        return 0.2 + 3 * torch.rand(SHAPE[0], 1, generator=g)
    return 0.2 + 3 * torch.rand(1, SHAPE[1], generator=g)


def _grads(n: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(3)
    return [torch.randn(SHAPE, generator=g) for _ in range(n)]


def _stepped(make_opt, param: torch.nn.Parameter, grads: list[torch.Tensor]) -> torch.optim.Optimizer:
    opt = make_opt([param])
    for grad in grads:
        param.grad = grad.clone()
        opt.step()
    return opt


def _adamw(params, eps=1e-8, weight_decay=0.1, lr=1e-2):
    return torch.optim.AdamW(params, lr=lr, betas=BETAS, eps=eps, weight_decay=weight_decay)


def _muon(params, weight_decay=0.1):
    return torch.optim.Muon(params, lr=0.02, momentum=0.95, weight_decay=weight_decay,
                            adjust_lr_fn="match_rms_adamw")


def _next_update(opt, param: torch.nn.Parameter, grad: torch.Tensor) -> torch.Tensor:
    before = param.detach().clone()
    param.grad = grad.clone()
    opt.step()
    return param.detach() - before


@pytest.mark.parametrize("make_opt", [_adamw, _muon], ids=["adamw", "muon"])
@pytest.mark.parametrize("kind", ["scalar", "rows", "columns"])
def test_rescale_equals_state_accumulated_in_new_coordinates(make_opt, kind):
    """(P1): state after `rescale` == state of an optimizer that lived in W' = S W all along."""
    S, grads = _factor(kind), _grads(5)
    w0 = torch.randn(SHAPE, generator=torch.Generator().manual_seed(1))
    old = torch.nn.Parameter(w0.clone())
    opt_old = _stepped(make_opt, old, grads)
    new = torch.nn.Parameter(S * w0)
    opt_new = _stepped(make_opt, new, [g / S for g in grads])

    with torch.no_grad():
        old.mul_(S)  # the transition itself
    touched = apply_opt_state_policy(opt_old, [Rescale("w", old, S)], "rescale")
    assert touched == 1
    for key, value in opt_new.state[new].items():
        torch.testing.assert_close(opt_old.state[old][key], value, rtol=1e-5, atol=1e-7)
    # From here on both optimizers make the same update for the same new-coordinates gradient (the weights
    # themselves took different paths, since each run stepped in its own coordinates; align them first).
    g_next = torch.randn(SHAPE, generator=torch.Generator().manual_seed(9))
    with torch.no_grad():
        new.copy_(old)
    torch.testing.assert_close(_next_update(opt_old, old, g_next / S), _next_update(opt_new, new, g_next / S),
                               rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("kind", ["scalar", "rows", "columns"])
def test_adamw_rescale_preserves_each_entrys_step_and_keep_does_not(kind):
    """(P2) with eps = 0 and no decay: dW'(rescaled state, gradient g/S) == dW(unscaled, gradient g)."""
    S, grads = _factor(kind), _grads(4)
    adam = partial(_adamw, eps=0.0, weight_decay=0.0)
    # Without decay the update does not depend on W; W = 0 keeps the measured difference free of rounding.
    w0 = torch.zeros(SHAPE)
    g_next = torch.randn(SHAPE, generator=torch.Generator().manual_seed(9))

    unscaled = torch.nn.Parameter(w0.clone())
    opt_unscaled = _stepped(adam, unscaled, grads)
    reference = _next_update(opt_unscaled, unscaled, g_next)

    updates = {}
    for policy in ("rescale", "keep"):
        p = torch.nn.Parameter(w0.clone())
        opt = _stepped(adam, p, grads)
        with torch.no_grad():
            p.mul_(S)
        apply_opt_state_policy(opt, [Rescale("w", p, S)], policy)
        updates[policy] = _next_update(opt, p, g_next / S)
    torch.testing.assert_close(updates["rescale"], reference, rtol=1e-5, atol=1e-7)
    assert not torch.allclose(updates["keep"], reference, rtol=1e-2)


def test_muon_scalar_rescale_reproduces_the_unscaled_step():
    """(P3): with S = 4 (exact in bf16) the Muon update of W' equals the unscaled update of W bit for bit."""
    S, grads = torch.tensor(4.0), _grads(4)
    muon = partial(_muon, weight_decay=0.0)
    w0 = torch.randn(SHAPE, generator=torch.Generator().manual_seed(1))
    g_next = torch.randn(SHAPE, generator=torch.Generator().manual_seed(9))
    unscaled = torch.nn.Parameter(w0.clone())
    opt_unscaled = _stepped(muon, unscaled, grads)
    p = torch.nn.Parameter(w0.clone())
    opt = _stepped(muon, p, grads)
    with torch.no_grad():
        p.mul_(S)
    apply_opt_state_policy(opt, [Rescale("w", p, S)], "rescale")
    # Without decay the update does not depend on W; measuring it from W = 0 keeps it free of rounding.
    with torch.no_grad():
        unscaled.zero_(), p.zero_()
    assert torch.equal(_next_update(opt, p, g_next / S), _next_update(opt_unscaled, unscaled, g_next))


@pytest.mark.parametrize("make_opt", [_adamw, _muon], ids=["adamw", "muon"])
def test_keep_leaves_state_untouched(make_opt):
    p, other = torch.nn.Parameter(torch.randn(SHAPE)), torch.nn.Parameter(torch.randn(SHAPE))
    opt = make_opt([p, other])
    for g in _grads(3):
        p.grad, other.grad = g.clone(), -g
        opt.step()
    saved = copy.deepcopy(opt.state_dict())
    assert apply_opt_state_policy(opt, [Rescale("w", p, _factor("rows"))], "keep") == 0
    for key, value in opt.state_dict()["state"][0].items():
        assert torch.equal(value, saved["state"][0][key])


def test_adamw_reset_zeroes_moments_keeps_step_and_others():
    """Next update after reset, eps = 0, no decay, at kept step k: per entry
    -lr * [(1-b1)/(1-b1^(k+1))] / sqrt[(1-b2)/(1-b2^(k+1))] * sign(g)."""
    adam = partial(_adamw, eps=0.0, weight_decay=0.0, lr=0.1)
    p, other = torch.nn.Parameter(torch.randn(SHAPE)), torch.nn.Parameter(torch.randn(SHAPE))
    opt = adam([p, other])
    grads = _grads(6)
    for g in grads:
        p.grad, other.grad = g.clone(), 2 * g
        opt.step()
    other_state = copy.deepcopy(opt.state[other])
    apply_opt_state_policy(opt, [Rescale("w", p, torch.tensor(2.0))], "reset")
    assert not opt.state[p]["exp_avg"].any() and not opt.state[p]["exp_avg_sq"].any()
    assert opt.state[p]["step"].item() == len(grads)
    for key, value in other_state.items():
        assert torch.equal(opt.state[other][key], value)
    g_next = grads[0]
    other.grad = torch.zeros(SHAPE)
    update = _next_update(opt, p, g_next)
    b1, b2, k1 = BETAS[0], BETAS[1], len(grads) + 1
    size = 0.1 * ((1 - b1) / (1 - b1**k1)) / ((1 - b2) / (1 - b2**k1)) ** 0.5
    torch.testing.assert_close(update, -size * g_next.sign(), rtol=1e-5, atol=1e-7)


def test_muon_reset_zeroes_momentum():
    p = torch.nn.Parameter(torch.randn(SHAPE))
    opt = _stepped(_muon, p, _grads(3))
    apply_opt_state_policy(opt, [Rescale("w", p, torch.tensor(2.0))], "reset")
    assert not opt.state[p]["momentum_buffer"].any()


def test_unknown_optimizer_state_is_refused_not_ignored():
    p = torch.nn.Parameter(torch.randn(SHAPE))
    opt = _stepped(lambda ps: torch.optim.Adagrad(ps), p, _grads(2))  # state 'sum' has no known rule
    saved = copy.deepcopy(opt.state[p])
    with pytest.raises(ValueError, match="optimizer state 'sum'"):
        apply_opt_state_policy(opt, [Rescale("w", p, torch.tensor(2.0))], "rescale")
    assert all(torch.equal(opt.state[p][k], v) for k, v in saved.items())  # nothing half-applied


def _tiny_model() -> Llama:
    torch.manual_seed(0)
    return Llama(LlamaConfig(vocab_size=53, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, d_ff=48,
                             max_seq_len=16, attn_gate="elementwise"))


def _loss(model: Llama, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, 53, (2, 16), generator=g)
    y = torch.randint(0, 53, (2, 16), generator=g)
    return F.cross_entropy(model(x).reshape(-1, 53), y.reshape(-1))


def test_gradient_of_rescaled_weights_is_gradient_over_factor():
    """(P0) on the real model, channel-level GQA + gate: dL/dW' == dL/dW / S for every rescaled weight."""
    model = _tiny_model()
    _loss(model).backward()
    grads_before = {id(p): p.grad.clone() for p in model.parameters()}
    model.zero_grad()
    rescales, _ = Wisca(qk_granularity="channel", vo_granularity="channel").transition(model)
    _loss(model).backward()
    for r in rescales:
        torch.testing.assert_close(r.param.grad, grads_before[id(r.param)] / r.factor, rtol=1e-4, atol=1e-7)


def test_composite_muon_adamw_children_are_updated():
    """With optim=muon, q/k/v/o sit in the Muon child of the composite; rescale reaches their buffers."""
    model = _tiny_model()
    optim_cfg = OmegaConf.create(dict(name="muon", lr=3e-3, muon_lr=0.02, muon_momentum=0.95,
                                      muon_adjust_lr="match_rms_adamw", betas=[0.9, 0.95], eps=1e-8,
                                      weight_decay=0.1, wd_exclude="none", grad_clip=1.0))
    opt = build_optimizer(model, optim_cfg)
    for seed in range(2):
        opt.zero_grad()
        _loss(model, seed).backward()
        opt.step()
    q = model.layers[0].attn.q_proj.weight
    buffer_before = opt.state[q]["momentum_buffer"].clone()
    rescales, _ = Wisca().transition(model)
    touched = apply_opt_state_policy(opt, rescales, "rescale")
    assert touched == len(rescales) == 4 * len(model.layers)
    torch.testing.assert_close(opt.state[q]["momentum_buffer"], buffer_before / rescales[0].factor)


# ------------------------------------------------------------------ every optimizer x every policy

def _nadam(params, weight_decay=0.1):
    return torch.optim.NAdam(params, lr=1e-2, betas=BETAS, eps=1e-8, weight_decay=weight_decay,
                             decoupled_weight_decay=True)


def _lamb(params, weight_decay=0.1):
    return Lamb([{"params": params, "weight_decay": weight_decay}], lr=1e-2, betas=BETAS)


@pytest.mark.parametrize("make_opt", [_nadam, _lamb], ids=["nadam", "lamb"])
@pytest.mark.parametrize("kind", ["scalar", "rows", "columns"])
def test_rescale_equals_state_accumulated_in_new_coordinates_for_nadam_and_lamb(make_opt, kind):
    """(P1) for the other optimizers with state: NAdam's mu_product is a scalar of its momentum schedule
    (a function of the step count), left as it is, like `step`."""
    test_rescale_equals_state_accumulated_in_new_coordinates(make_opt, kind)


def _composed(optimizer: str, policy: str):
    from lit_modules.config.composition import compose_run_config
    from lit_modules.config.validate import validated

    return validated(compose_run_config([f"optim={optimizer}", "wisca=qk_vo_tensor", "techniques.wisca.every_n_steps=2",
                                         f"techniques.wisca.opt_state={policy}", "regime=steps",
                                         "trainer.max_steps=4"])).config


@pytest.mark.parametrize("policy", OPT_STATE_POLICIES)
@pytest.mark.parametrize("optimizer", sorted(optimizer_specs()))
def test_every_optimizer_and_policy_is_exact_or_refused_before_the_first_step(optimizer, policy):
    """Each pair either is refused by validation (one sentence, before any step) or, on the optimizer the run
    builds, a transition keeps the function and its policy leaves the state exactly as stated: keep changes
    nothing, rescale divides first moments by S and second by S^2, reset zeroes them; counters stay."""
    if optimizer == "adam_mini" and policy != "keep":
        with pytest.raises(ConfigError, match=f"opt_state={policy} has no rule for Adam-mini"):
            _composed(optimizer, policy)
        return
    cfg = _composed(optimizer, policy)
    model = _tiny_model()
    opt = build_optimizer(model, cfg.optim)
    for seed in range(3):
        opt.zero_grad()
        _loss(model, seed).backward()
        opt.step()
    before = {id(p): {k: v.clone() if torch.is_tensor(v) else v for k, v in child.state[p].items()}
              for child in leaf_optimizers(opt) for p in child.state}
    idx = torch.arange(16).remainder(53)[None]
    with torch.no_grad():
        logits = model(idx)
        rescales, _ = Wisca(opt_state=policy).transition(model)
        torch.testing.assert_close(model(idx), logits, rtol=1e-4, atol=1e-5)
    touched = apply_opt_state_policy(opt, rescales, policy)
    assert touched == (0 if policy == "keep" else len(rescales))
    factors = {id(r.param): r.factor for r in rescales}
    for child in leaf_optimizers(opt):
        for p, state in child.state.items():
            for key, value in state.items():
                old = before[id(p)][key]
                if id(p) not in factors or policy == "keep" or key in COUNTER_KEYS:
                    assert torch.equal(torch.as_tensor(value), torch.as_tensor(old)), (optimizer, key)
                elif policy == "reset":
                    assert not value.any(), (optimizer, key)
                else:
                    power = 1 if key in FIRST_MOMENT_KEYS else 2
                    torch.testing.assert_close(value, old / factors[id(p)] ** power)
