"""Our Llama's parameter names <-> Hugging Face's LlamaForCausalLM's (the same tensors, the same layouts:
Linear weights are [out, in] in both, RoPE is rotate_half in both, so only the names differ)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from lit_modules.hf import ModelFolderError

if TYPE_CHECKING:
    import torch

# (our name pattern, theirs); `{i}` is the layer index.
_LAYER = (
    ("attn_norm.weight", "input_layernorm.weight"),
    ("attn.q_proj.weight", "self_attn.q_proj.weight"),
    ("attn.k_proj.weight", "self_attn.k_proj.weight"),
    ("attn.v_proj.weight", "self_attn.v_proj.weight"),
    ("attn.o_proj.weight", "self_attn.o_proj.weight"),
    ("mlp_norm.weight", "post_attention_layernorm.weight"),
    ("mlp.gate_proj.weight", "mlp.gate_proj.weight"),
    ("mlp.up_proj.weight", "mlp.up_proj.weight"),
    ("mlp.down_proj.weight", "mlp.down_proj.weight"),
)
_TOP = (("tok_emb.weight", "model.embed_tokens.weight"), ("final_norm.weight", "model.norm.weight"),
        ("lm_head.weight", "lm_head.weight"))
_OURS_LAYER = re.compile(r"^layers\.(\d+)\.(.+)$")
_THEIRS_LAYER = re.compile(r"^model\.layers\.(\d+)\.(.+)$")


def hf_name(ours: str) -> str:
    """The Hugging Face name of one of our parameter (or module) names; KeyError if it has none."""
    for a, b in _TOP:
        if ours == a:
            return b
    match = _OURS_LAYER.match(ours)
    if match:
        rest = match.group(2)
        for a, b in _LAYER:
            if rest == a or rest == a.removesuffix(".weight"):
                return f"model.layers.{match.group(1)}.{b if rest == a else b.removesuffix('.weight')}"
    raise KeyError(ours)


def our_name(theirs: str) -> str:
    """Our name of a Hugging Face Llama parameter name; KeyError if we have no such parameter."""
    for a, b in _TOP:
        if theirs == b:
            return a
    match = _THEIRS_LAYER.match(theirs)
    if match:
        for a, b in _LAYER:
            if match.group(2) == b:
                return f"layers.{match.group(1)}.{a}"
    raise KeyError(theirs)


def to_hf(state: dict[str, torch.Tensor], tied: bool) -> dict[str, torch.Tensor]:
    """Our plain Llama's state_dict under Hugging Face's names; a tied head is stored once (as HF does)."""
    refuse_unnamed(state)
    out = {hf_name(k): v.detach().contiguous().clone() for k, v in state.items() if not (tied and k == "lm_head.weight")}
    return out


def refuse_unnamed(names) -> None:
    """ModelFolderError for the first of our tensor names (e.g. a parameter a technique added and kept in its
    inference form) that a Hugging Face Llama has no place for."""
    unnamed = []
    for name in names:
        try:
            hf_name(name)
        except KeyError:
            unnamed.append(name)
    if unnamed:
        raise ModelFolderError(
            f"The merged model has {unnamed[0]} ({len(unnamed)} such tensor{'s' if len(unnamed) > 1 else ''}), which a "
            "Hugging Face Llama has no place for, so it cannot be exported in that format; export it with "
            "`python -m lit_modules.export plain` instead.")


def expected_hf_names(n_layers: int, tied: bool) -> set[str]:
    names = {b for a, b in _TOP if not (tied and a == "lm_head.weight")}
    names |= {f"model.layers.{i}.{b}" for i in range(n_layers) for _, b in _LAYER}
    return names
