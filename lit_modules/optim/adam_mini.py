"""Adam-mini (Zhang et al., arXiv 2406.16793): Adam with one second-moment value per parameter block.

Written here rather than taken from PyPI `adam-mini` 1.1.1, with that release's partition and update rule:
the package classifies parameters by substrings of their names (embed/embd/wte, lm_head/output, q_proj/k_proj,
v_proj, o_proj, mlp, bias), builds its own one-parameter groups and decides weight decay by name, so it would
bypass this project's parameter groups (decay policy, MoLS's per-group `lr_scale`, techniques' families).
Here the partition is read from the family each group already carries (lit_modules/optim/param_groups.py):

    family                           block sharing one v (the 1.1.1 rule for the same tensors)
    emb (tok_emb), head (lm_head)    one row (one token)                        "one lr per token"
    qk  (q_proj, k_proj)             one head: head_dim consecutive rows         "one lr per head"
    vo  (v_proj, o_proj), mlp        one row (one output neuron)                 "one lr per neuron"
    router, experts (MoE, under mlp) one row                                       (their names hold "mlp")
    attn_gate, norm, other           the whole tensor                            the default block
    lora_* (LoRA factors)            one row  [our choice: 1.1.1 would match q_proj in an adapter's name and
                                              reshape a rank-r factor by the head size, which does not fit]

Update, per block b of parameter p (1.1.1's, with m the full-shape first moment):
    p <- p (1 - lr wd)                                 (decoupled decay; wd from our group, i.e. the policy)
    m <- beta1 m + (1 - beta1) g
    v_b <- beta2 v_b + (1 - beta2) mean_{i in b} g_i^2
    p <- p - lr * (m / (1 - beta1^t)) / (sqrt(v_b / (1 - beta2^t)) + eps)
MoLS scales a group's `lr` (its `lr_scale`), i.e. the learning rate of every block in that group.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Optional

import torch
from torch import nn

from lit_modules.optim.param_groups import GroupSpec, torch_groups
from lit_modules.optim.registry import register_optimizer

WHOLE_TENSOR = 0  # block_rows for a tensor that shares one v
ROW_FAMILIES = ("emb", "head", "vo", "mlp", "router", "experts", "lora_qk", "lora_vo", "lora_attn_gate", "lora_mlp")
HEAD_FAMILIES = ("qk",)


def block_rows(family: str, head_dim: int) -> int:
    """Rows per block sharing one second moment (WHOLE_TENSOR: the whole tensor is one block)."""
    if family in HEAD_FAMILIES:
        return head_dim
    return 1 if family in ROW_FAMILIES else WHOLE_TENSOR


class AdamMini(torch.optim.Optimizer):
    """Groups carry `family` (the partition) and, as usual, `lr` and `weight_decay`; see the module docstring."""

    def __init__(self, params: list[dict], lr: float, betas: tuple[float, float], eps: float, head_dim: int):
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=0.0, family="other"))
        self.head_dim = int(head_dim)

    def _blocks(self, p: torch.Tensor, family: str) -> int:
        rows = block_rows(family, self.head_dim)
        if p.ndim < 2 or rows == WHOLE_TENSOR or p.shape[0] % rows:
            return 1
        return p.shape[0] // rows

    @torch.no_grad()
    def step(self, closure: Optional[Callable[[], Any]] = None) -> Any:  # type: ignore[override]
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            lr, eps, wd = group["lr"], group["eps"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                blocks = self._blocks(p, group["family"])
                if not state:
                    state["step"] = 0
                    state["m"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    state["vmean"] = torch.zeros(blocks, 1, dtype=p.dtype, device=p.device)
                grad = p.grad
                state["step"] += 1
                if wd > 0.0:
                    p.mul_(1 - lr * wd)
                state["m"].lerp_(grad, 1 - beta1)
                per_block = grad.reshape(blocks, -1)
                state["vmean"].mul_(beta2).add_(per_block.mul(per_block).mean(dim=1, keepdim=True), alpha=1 - beta2)
                bias_correction_1 = 1 - beta1 ** state["step"]
                bias_correction_2 = 1 - beta2 ** state["step"]
                h = (state["vmean"].sqrt() / math.sqrt(bias_correction_2)).add_(eps)
                update = (state["m"].reshape(blocks, -1) / h).reshape(p.shape)
                p.add_(update, alpha=-lr / bias_correction_1)
        return loss


def _head_dim(model: nn.Module) -> int:
    """Rows of q_proj/k_proj per attention head (the q/k blocks); a compiled model keeps its cfg."""
    cfg = getattr(model, "cfg", None) or getattr(getattr(model, "_orig_mod", None), "cfg", None)
    if cfg is None:
        raise ValueError("optim=adam_mini needs the model's config (cfg.head_dim) to split q/k into heads.")
    return cfg.head_dim


@register_optimizer("adam_mini", adam_family=(AdamMini,))
def build(specs: list[GroupSpec], cfg: Any, model: nn.Module) -> AdamMini:
    groups = torch_groups(specs, cfg.lr, cfg.weight_decay)
    return AdamMini(groups, lr=cfg.lr, betas=tuple(cfg.betas), eps=cfg.eps, head_dim=_head_dim(model))
