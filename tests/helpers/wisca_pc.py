"""WISCA on PC weights: rounding-aware comparison, unbalanced trained models, periodic-transition check."""

# With the PC layer, `attn.o_proj.weight` is computed: W_eff = gamma * sg(sigma) * p(W / sigma), sigma = u^T W v
# + eps, from the raw `parametrizations.weight.original`. A rescale must therefore go to the raw weight, which
# scales W_eff by the same factor exactly when the map is positively homogeneous of degree 1 (norm recovery
# on; any per-row/column scale only at level 0), and the optimizer state lives on that raw weight too.

from __future__ import annotations

from functools import partial
from types import SimpleNamespace

import torch
import torch.nn.functional as F
from omegaconf import DictConfig

from lit_modules.build import build_model, build_techniques
from lit_modules.techniques.pc_layer.parametrization import raw_weight, refresh_all
from lit_modules.techniques.wisca.callback import WiscaTransitions
from tests.helpers.models import tokens as random_tokens

VOCAB = 61
SEQ = 24
# fp32 rounding of the (fp32) scales and weights, through softmax; the defect this guards against moved the
# logits by ~3e-2 of their largest value.
LOGIT_TOL = 2e-5

tokens = partial(random_tokens, VOCAB, 4, SEQ)  # tokens(seed): 4 x SEQ ids drawn from that seed


def assert_close_up_to_rounding(actual: torch.Tensor, expected: torch.Tensor, tol: float = 5e-6) -> None:
    """Equal up to fp32 rounding, which grows with the values: max |error| <= tol * max |expected|."""
    error = (actual - expected).abs().max().item()
    assert error <= tol * expected.abs().max().item(), error


def holder(module: torch.nn.Module) -> torch.Tensor:
    """The tensor that holds a Linear's weight: the raw PC weight, or the plain one."""
    return raw_weight(module) if hasattr(module, "parametrizations") else module.weight


@torch.no_grad()
def unbalance(model: torch.nn.Module, seed: int) -> None:
    """Rows (o: columns) of very different size and a global imbalance: every WISCA scale is far from 1."""
    gen = torch.Generator().manual_seed(seed)
    for layer in model.layers:
        attn = layer.attn
        for proj in (attn.q_proj, attn.k_proj, attn.v_proj):
            w = holder(proj)
            w.mul_(10 ** (torch.rand(w.shape[0], 1, generator=gen) - 0.5))
        o = holder(attn.o_proj)
        o.mul_(10 ** (torch.rand(1, o.shape[1], generator=gen) - 0.5) * 0.05)
        holder(attn.q_proj).mul_(3.0)


def _train_a_little(model: torch.nn.Module, steps: int = 2) -> torch.optim.Optimizer:
    """A few real AdamW steps (with the PC refresh after each), so weights and optimizer state are trained."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.1)  # small: keeps the imbalance
    refresh_all(model, 10)  # as PowerIterationRefresh does at train start
    for step in range(steps):
        idx = tokens(100 + step)
        loss = F.cross_entropy(model(idx[:, :-1]).flatten(0, 1), idx[:, 1:].flatten())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        refresh_all(model, 10)
    return optimizer


def _moments(optimizer: torch.optim.Optimizer) -> dict[int, dict[str, torch.Tensor]]:
    return {id(p): {k: v.clone() for k, v in s.items() if k != "step"} for p, s in optimizer.state.items()}


def check_periodic_transition(cfg: DictConfig) -> None:
    techniques = build_techniques(cfg)
    model, _ = build_model(cfg, techniques)
    unbalance(model, seed=3)
    optimizer = _train_a_little(model)
    (callback,) = [c for t in techniques for c in t.callbacks() if isinstance(c, WiscaTransitions)]
    state_before = _moments(optimizer)
    recorded = []
    original = callback.technique.transition
    callback.technique.transition = lambda m: recorded.append(original(m)) or recorded[-1]
    idx = tokens(0)
    with torch.no_grad():
        before = model(idx)
    trainer = SimpleNamespace(global_step=callback.technique.settings.every_n_steps, logger=None, optimizers=[optimizer])
    callback.on_train_batch_end(trainer, SimpleNamespace(model=model), None, None, 0)
    with torch.no_grad():
        after = model(idx)
    assert callback.transitions == 1
    assert_close_up_to_rounding(after, before, tol=LOGIT_TOL)
    # The transition really moved the weights it owns (else the check above proves nothing) ...
    (rescales, _), = recorded
    assert len(rescales) == 2 * (callback.technique.settings.qk + callback.technique.settings.vo) * len(model.layers)
    assert all((r.factor - 1).abs().max() > 0.05 for r in rescales)
    # ... and every rescaled weight is a tensor the optimizer holds state for: m / S, v / S^2 (rescale).
    params = {id(p) for group in optimizer.param_groups for p in group["params"]}
    for r in rescales:
        assert id(r.param) in params, f"{r.name} is not a trained tensor"
        old, new = state_before[id(r.param)], optimizer.state[r.param]
        factor = r.factor.to(old["exp_avg"].dtype)
        torch.testing.assert_close(new["exp_avg"], old["exp_avg"] / factor, rtol=1e-6, atol=0)
        torch.testing.assert_close(new["exp_avg_sq"], old["exp_avg_sq"] / factor**2, rtol=1e-6, atol=0)
