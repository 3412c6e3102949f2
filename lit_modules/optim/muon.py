"""Muon (torch.optim.Muon) on the hidden matrices at `optim.muon_lr`, AdamW on everything else at `optim.lr`."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Annotated, Any

import torch
from torch import nn

from lit_modules.optim.adamw import fused_on_cuda
from lit_modules.optim.composite import CompositeOptimizer
from lit_modules.optim.param_groups import GroupSpec, torch_groups
from lit_modules.optim.registry import register_optimizer
from lit_modules.typed_settings import Bound, OneOf

# Families whose 2-D weights Muon orthogonalizes; embeddings, head and gains stay with AdamW, as in
# the Muon reference setups.
MUON_FAMILIES = ("qk", "vo", "attn_gate", "mlp", "experts")  # an MoE router stays with AdamW, as the embeddings
ADJUST_LR = ("original", "match_rms_adamw")  # torch.optim.Muon's adjust_lr_fn


@dataclass
class MuonSettings:  # flat in `optim` (lit_modules/config/schema.py), as every recorded run holds them
    muon_lr: Annotated[float, Bound(gt=0)] = 0.02
    muon_momentum: Annotated[float, Bound(ge=0, lt=1)] = 0.95
    muon_adjust_lr: Annotated[str, OneOf(ADJUST_LR)] = "match_rms_adamw"


@register_optimizer("muon", settings=MuonSettings)
def build(specs: list[GroupSpec], cfg: Any, model: nn.Module) -> CompositeOptimizer:
    muon_specs, adam_specs = [], []
    for s in specs:
        if s.family not in MUON_FAMILIES:
            adam_specs.append(s)
            continue
        # Muon orthogonalizes matrices only; scalars and vectors of the same family (e.g. a
        # technique's learnable gain) go to AdamW, so they never silently pull the matrices with them.
        matrices = [(p, n) for p, n in zip(s.params, s.param_names) if p.ndim == 2]
        others = [(p, n) for p, n in zip(s.params, s.param_names) if p.ndim != 2]
        if matrices:
            muon_specs.append(replace(s, params=[p for p, _ in matrices], param_names=[n for _, n in matrices]))
        if others:
            adam_specs.append(replace(s, name=f"{s.name}.non_matrix", params=[p for p, _ in others],
                                      param_names=[n for _, n in others]))
    muon_groups = torch_groups(muon_specs, cfg.muon_lr, cfg.weight_decay)
    # None when nothing trainable is a hidden matrix (e.g. LoRA: only adapter factors train).
    muon = torch.optim.Muon(
        muon_groups,
        lr=cfg.muon_lr,
        momentum=cfg.muon_momentum,
        adjust_lr_fn=cfg.muon_adjust_lr,
    ) if muon_groups else None
    adam_groups = torch_groups(adam_specs, cfg.lr, cfg.weight_decay)
    adam = torch.optim.AdamW(adam_groups, lr=cfg.lr, betas=tuple(cfg.betas), eps=cfg.eps,
                             **fused_on_cuda(adam_groups))
    return CompositeOptimizer([muon, adam] if muon is not None else [adam])
