"""AdamW (torch.optim.AdamW), the default optimizer: every group at `optim.lr`, decoupled decay."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from lit_modules.optim.param_groups import GroupSpec, torch_groups
from lit_modules.optim.registry import register_optimizer


def fused_on_cuda(groups: list[dict]) -> dict[str, bool]:
    """`fused=True` when every parameter is a floating-point CUDA tensor: AdamW's whole step is then a few fused
    kernels instead of a foreach chain of launches per tensor group. Elsewhere (the CPU) torch's default stays,
    so every CPU run, and the golden histories, step exactly as before."""
    params = [p for g in groups for p in g["params"]]
    return {"fused": True} if params and all(p.is_cuda and p.is_floating_point() for p in params) else {}


@register_optimizer("adamw", adam_family=(torch.optim.AdamW,))
def build(specs: list[GroupSpec], cfg: Any, model: nn.Module) -> torch.optim.Optimizer:
    groups = torch_groups(specs, cfg.lr, cfg.weight_decay)
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=tuple(cfg.betas), eps=cfg.eps, **fused_on_cuda(groups))
