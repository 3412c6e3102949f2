"""NAdam (Dozat 2016; torch.optim.NAdam) with decoupled (AdamW-style) weight decay."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from lit_modules.optim.param_groups import GroupSpec, torch_groups
from lit_modules.optim.registry import register_optimizer


@register_optimizer("nadam", adam_family=(torch.optim.NAdam,))
def build(specs: list[GroupSpec], cfg: Any, model: nn.Module) -> torch.optim.Optimizer:
    groups = torch_groups(specs, cfg.lr, cfg.weight_decay)
    return torch.optim.NAdam(groups, lr=cfg.lr, betas=tuple(cfg.betas), eps=cfg.eps, decoupled_weight_decay=True)
