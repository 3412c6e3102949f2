"""LAMB (You et al., arXiv 1904.00962): Adam's direction with a per-tensor trust ratio.

Per parameter tensor p (Algorithm 2 of the paper, with bias correction as in its experiments):
    m <- beta1 m + (1 - beta1) g,   v <- beta2 v + (1 - beta2) g^2
    r = (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + eps) + wd p
    p <- p - lr * (||p|| / ||r||) r          (trust ratio 1 where ||p|| or ||r|| is 0)
The scaling function phi of the paper is the identity (no clipping of ||p||). Decay is inside r, so it is
normalized with the update; `weight_decay` per group follows the project's decay policy.

A group without decay (norm gains; the embedding under wd_exclude=norms_biases_embeddings; any group when
weight_decay is 0) takes the plain Adam step, trust ratio 1, as NVIDIA apex (use_nvlamb=False) and TF-Addons
(exclude_from_layer_adaptation defaults to the decay exclusions) do; `trust_no_decay=True`
(optim.lamb_trust_no_decay) applies the ratio to every tensor, as Algorithm 2 reads. No reference fixes that
choice: the run is tagged with it (fidelity...=assumed).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

import torch
from torch import nn

from lit_modules.optim.param_groups import GroupSpec, torch_groups
from lit_modules.optim.registry import register_optimizer


@dataclass
class LambSettings:  # flat in `optim` (lit_modules/config/schema.py); conf/optim/lamb.yaml sets it
    # None means "not LAMB": the field was added after runs were recorded, and stays out of their identity.
    lamb_trust_no_decay: Optional[bool] = None


class Lamb(torch.optim.Optimizer):
    def __init__(self, params: list[dict], lr: float, betas: tuple[float, float], eps: float = 1e-6,
                 trust_no_decay: bool = False):
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=0.0,
                                      trust_no_decay=bool(trust_no_decay)))

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        for group in self.param_groups:  # a state saved before the knob existed
            group.setdefault("trust_no_decay", self.defaults["trust_no_decay"])

    @torch.no_grad()
    def step(self, closure: Optional[Callable[[], Any]] = None) -> Any:  # type: ignore[override]
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state["step"] += 1
                state["exp_avg"].lerp_(p.grad, 1 - beta1)
                state["exp_avg_sq"].mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
                m_hat = state["exp_avg"] / (1 - beta1 ** state["step"])
                v_hat = state["exp_avg_sq"] / (1 - beta2 ** state["step"])
                r = m_hat / (v_hat.sqrt() + group["eps"])
                if group["weight_decay"] > 0.0:
                    r.add_(p, alpha=group["weight_decay"])
                if group["weight_decay"] > 0.0 or group["trust_no_decay"]:
                    w_norm, r_norm = p.norm(), r.norm()
                    r.mul_(torch.where((w_norm > 0) & (r_norm > 0), w_norm / r_norm, torch.ones_like(w_norm)))
                p.add_(r, alpha=-group["lr"])
        return loss


def tags(cfg: Any) -> dict[str, str]:
    return {"optim.lamb_trust_no_decay": str(bool(getattr(cfg, "lamb_trust_no_decay", None))).lower(),
            "fidelity.optim.lamb_trust_no_decay": "assumed"}


@register_optimizer("lamb", settings=LambSettings, adam_family=(Lamb,), tags=tags)
def build(specs: list[GroupSpec], cfg: Any, model: nn.Module) -> Lamb:
    groups = torch_groups(specs, cfg.lr, cfg.weight_decay)
    return Lamb(groups, lr=cfg.lr, betas=tuple(cfg.betas), eps=cfg.eps,
                trust_no_decay=bool(getattr(cfg, "lamb_trust_no_decay", None)))
