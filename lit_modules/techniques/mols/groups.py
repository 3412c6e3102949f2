"""Which MoLS group each optimizer family belongs to.

The paper's modules are emb, qk, vo, mlp and head [SECONDARY]. Two families have no documented home:
- norm gains (`norm_policy`): `exclude` keeps them at alpha = 1; `own_group` makes them a sixth group;
- the attention output gate (`attn_gate_group`): merged into qk, vo or mlp, its own group, or excluded.
The variants' families (MoE router and experts, LoRA factors) are groups of their own, scaled when named.
Every family maps to exactly one group; FIXED means "not scaled" (alpha = 1).
"""

from __future__ import annotations

from collections.abc import Iterable

PAPER_GROUPS = ("emb", "qk", "vo", "mlp", "head")
# Families of the variants, each a group of its own when techniques.mols.modules names it (else alpha = 1):
# a mixture of experts' router and experts, and LoRA's adapter factors per adapted family.
VARIANT_GROUPS = ("router", "experts", "lora_qk", "lora_vo", "lora_attn_gate", "lora_mlp")
MODULES = PAPER_GROUPS + VARIANT_GROUPS
NORM_POLICIES = ("exclude", "own_group")
ATTN_GATE_GROUPS = ("own", "qk", "vo", "mlp", "exclude")
FIXED = "fixed"
# Groups AdamW manages under optim=muon (Muon takes the 2-D hidden matrices; see optim/muon.py).
ADAM_GROUPS_UNDER_MUON = ("emb", "head", "norm")


def group_of(family: str, norm_policy: str = "exclude", attn_gate_group: str = "vo") -> str:
    """MoLS group of an optimizer family (emb|qk|vo|attn_gate|mlp|norm|head|other)."""
    if family in PAPER_GROUPS or family in VARIANT_GROUPS:
        return family
    if family == "norm":
        return "norm" if norm_policy == "own_group" else FIXED
    if family == "attn_gate":
        if attn_gate_group == "own":
            return "attn_gate"
        return FIXED if attn_gate_group == "exclude" else attn_gate_group
    return FIXED  # `other`: parameters another technique added; MoLS has no SNR rule for them


def scaled_groups(modules: Iterable[str], norm_policy: str, attn_gate_group: str) -> list[str]:
    """Groups MoLS measures and scales: the chosen paper modules plus the groups the policies create."""
    groups = [m for m in MODULES if m in set(modules)]
    if attn_gate_group == "own":
        groups.append("attn_gate")
    if norm_policy == "own_group":
        groups.append("norm")
    return groups
