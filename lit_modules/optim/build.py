"""Optimizer + schedule from the config and the tagged parameter groups."""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, Iterable

import torch
from torch import nn

from lit_modules.optim.adam_mini import AdamMini
from lit_modules.optim.composite import CompositeOptimizer
from lit_modules.optim.lamb import Lamb
from lit_modules.optim.param_groups import GroupSpec, build_group_specs
from lit_modules.optim.schedules import GroupScaledSchedule, schedule_fn

# Families whose 2-D weights Muon orthogonalizes; embeddings, head and gains stay with AdamW, as in
# the Muon reference setups.
MUON_FAMILIES = ("qk", "vo", "attn_gate", "mlp", "experts")  # an MoE router stays with AdamW, as the embeddings

GroupEditor = Callable[[list[GroupSpec]], None]
# Optimizers with Adam's per-coordinate (or per-block) normalized step: MoLS scales their groups' rates.
ADAM_FAMILY = (torch.optim.Adam, torch.optim.AdamW, torch.optim.NAdam, AdamMini, Lamb)


def fused_on_cuda(groups: list[dict]) -> dict[str, bool]:
    """`fused=True` when every parameter is a floating-point CUDA tensor: AdamW's whole step is then a few fused
    kernels instead of a foreach chain of launches per tensor group. Elsewhere (the CPU) torch's default stays,
    so every CPU run, and the golden histories, step exactly as before."""
    params = [p for g in groups for p in g["params"]]
    return {"fused": True} if params and all(p.is_cuda and p.is_floating_point() for p in params) else {}


def _torch_groups(specs: Iterable[GroupSpec], lr: float, weight_decay: float) -> list[dict]:
    return [
        {
            "params": s.params,
            "name": s.name,
            "family": s.family,
            "lr": lr,
            "peak_lr": lr,
            "lr_scale": s.lr_scale,
            "weight_decay": weight_decay if s.decayed else 0.0,
        }
        for s in specs
        if s.params
    ]


def build_optimizer(
    model: nn.Module, optim_cfg, group_editors: Iterable[GroupEditor] = ()
) -> torch.optim.Optimizer:
    specs = build_group_specs(model, optim_cfg.wd_exclude)
    for edit in group_editors:
        edit(specs)
    betas = tuple(optim_cfg.betas)
    if optim_cfg.name == "muon":
        return _muon(specs, optim_cfg, betas)
    # Every other optimizer takes all the groups at the one learning rate.
    groups = _torch_groups(specs, optim_cfg.lr, optim_cfg.weight_decay)
    if optim_cfg.name == "adamw":
        return torch.optim.AdamW(groups, lr=optim_cfg.lr, betas=betas, eps=optim_cfg.eps, **fused_on_cuda(groups))
    if optim_cfg.name == "nadam":  # decoupled decay, as AdamW's
        return torch.optim.NAdam(groups, lr=optim_cfg.lr, betas=betas, eps=optim_cfg.eps, decoupled_weight_decay=True)
    if optim_cfg.name == "lamb":
        return Lamb(groups, lr=optim_cfg.lr, betas=betas,
                    eps=optim_cfg.eps, trust_no_decay=bool(getattr(optim_cfg, "lamb_trust_no_decay", None)))
    if optim_cfg.name == "adam_mini":
        return AdamMini(groups, lr=optim_cfg.lr, betas=betas, eps=optim_cfg.eps, head_dim=_head_dim(model))
    raise ValueError(f"Unknown optimizer '{optim_cfg.name}'.")


def _muon(specs: list[GroupSpec], optim_cfg, betas: tuple) -> CompositeOptimizer:
    """Muon on the hidden matrices at muon_lr, AdamW on everything else at lr."""
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
    muon_groups = _torch_groups(muon_specs, optim_cfg.muon_lr, optim_cfg.weight_decay)
    # None when nothing trainable is a hidden matrix (e.g. LoRA: only adapter factors train).
    muon = torch.optim.Muon(
        muon_groups,
        lr=optim_cfg.muon_lr,
        momentum=optim_cfg.muon_momentum,
        adjust_lr_fn=optim_cfg.muon_adjust_lr,
    ) if muon_groups else None
    adam_groups = _torch_groups(adam_specs, optim_cfg.lr, optim_cfg.weight_decay)
    adam = torch.optim.AdamW(adam_groups, lr=optim_cfg.lr, betas=betas, eps=optim_cfg.eps, **fused_on_cuda(adam_groups))
    return CompositeOptimizer([muon, adam] if muon is not None else [adam])


def optimizer_tags(optim_cfg) -> dict[str, str]:
    """Run tags for the optimizer's choices no reference fixes (LAMB: where its trust ratio applies)."""
    if optim_cfg.name != "lamb":
        return {}
    return {"optim.lamb_trust_no_decay": str(bool(getattr(optim_cfg, "lamb_trust_no_decay", None))).lower(),
            "fidelity.optim.lamb_trust_no_decay": "assumed"}


def _head_dim(model: nn.Module) -> int:
    """Rows of q_proj/k_proj per attention head (Adam-mini's q/k blocks); a compiled model keeps its cfg."""
    cfg = getattr(model, "cfg", None) or getattr(getattr(model, "_orig_mod", None), "cfg", None)
    if cfg is None:
        raise ValueError("optim=adam_mini needs the model's config (cfg.head_dim) to split q/k into heads.")
    return cfg.head_dim


def build_schedule(optimizer: torch.optim.Optimizer, schedule_cfg, steps: int, warmup: int) -> GroupScaledSchedule:
    fn = schedule_fn(schedule_cfg.name, steps, warmup, schedule_cfg.min_lr_ratio, schedule_cfg.decay_fraction)
    return GroupScaledSchedule(optimizer, fn)
