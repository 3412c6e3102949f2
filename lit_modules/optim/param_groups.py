"""Optimizer parameter groups, tagged by module family, built in one place.

Families: emb, qk, vo, attn_gate, mlp, norm, head (and `other` for anything a technique adds outside
those modules). A LoRA adapter's factors (`...lora_A`, `...lora_B`, see techniques/lora/) are their own family,
`lora_<family of the adapted weight>` (lora_qk, lora_vo, lora_attn_gate, lora_mlp), so decay, MoLS groups and
Muon treat them apart from the frozen weights they adapt. A mixture of experts' router and routed experts are
the families `router` and `experts` (its shared expert is `mlp`). Each family may split into a decayed and a
non-decayed group, depending on the weight-decay exclusion policy. Every trainable parameter lands in exactly
one group.

Each group carries `lr_scale` (multiplied into the schedule every step, so a technique such as a
module-wise learning-rate rule changes one number and the schedule picks it up) and `family`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn

FAMILIES = ("emb", "qk", "vo", "attn_gate", "mlp", "router", "experts", "norm", "head", "lora_qk", "lora_vo",
            "lora_attn_gate", "lora_mlp", "other")
ADAPTER_MARK = ".lora_"  # in the name of every LoRA factor (techniques/lora/adapter.py) and nothing else

# Path fragments that identify a family; the first match wins, so order matters.
_FAMILY_RULES: tuple[tuple[str, str], ...] = (
    ("tok_emb.", "emb"),
    ("lm_head.", "head"),
    ("attn.q_proj", "qk"),
    ("attn.k_proj", "qk"),
    ("attn.v_proj", "vo"),
    ("attn.o_proj", "vo"),
    ("attn.gate_proj", "attn_gate"),
    ("mlp.router.", "router"),  # mixture of experts (model/moe.py); its shared expert stays `mlp`
    ("mlp.experts.", "experts"),
    ("mlp.", "mlp"),
    ("norm.", "norm"),
)


def family_of(param_name: str) -> str:
    if ADAPTER_MARK in param_name:
        adapted = family_of(param_name.split(ADAPTER_MARK, 1)[0])
        return f"lora_{adapted}" if f"lora_{adapted}" in FAMILIES else "other"
    for fragment, family in _FAMILY_RULES:
        if fragment in param_name:
            return family
    return "other"


def is_decayed(param_name: str, param: torch.Tensor, wd_exclude: str) -> bool:
    """Policy names come from the weight-decay papers: which tensors skip decay is a per-experiment choice."""
    if wd_exclude == "none":
        return True
    family = family_of(param_name)
    if param.ndim < 2 or family == "norm":  # norm gains, biases, learnable scalars
        return False
    if wd_exclude == "norms_biases_embeddings" and family == "emb":
        return False
    return True


@dataclass
class GroupSpec:
    """A parameter group before an optimizer exists; a group editor may change its `lr_scale`.

    It holds no weight decay: `decayed` says whether the group decays, and optim/build.py gives it the
    configured weight_decay or 0 (a technique such as MoLS edits the torch group's weight_decay later)."""

    name: str
    family: str
    decayed: bool
    params: list[nn.Parameter] = field(default_factory=list)
    param_names: list[str] = field(default_factory=list)
    lr_scale: float = 1.0

    @property
    def numel(self) -> int:
        return sum(p.numel() for p in self.params)


def build_group_specs(model: nn.Module, wd_exclude: str) -> list[GroupSpec]:
    groups: dict[tuple[str, bool], GroupSpec] = {}
    for name, param in model.named_parameters():  # deduplicates tied weights
        if not param.requires_grad:
            continue
        family = family_of(name)
        decayed = is_decayed(name, param, wd_exclude)
        key = (family, decayed)
        if key not in groups:
            groups[key] = GroupSpec(name=family if decayed else f"{family}.no_decay", family=family, decayed=decayed)
        groups[key].params.append(param)
        groups[key].param_names.append(name)
    order = {f: i for i, f in enumerate(FAMILIES)}
    return sorted(groups.values(), key=lambda g: (order[g.family], not g.decayed))


def torch_groups(specs: list[GroupSpec], lr: float, weight_decay: float) -> list[dict]:
    """torch.optim param groups at one learning rate, with the configured decay on the decayed groups, each
    keeping its name, family and `lr_scale` (the schedule multiplies it in) and its peak rate."""
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
