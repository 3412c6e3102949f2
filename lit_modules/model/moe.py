"""Mixture-of-experts FFN: a top-k router over SwiGLU experts, an optional shared expert, and the
load-balancing loss.

    y = shared(x) + sum_{e in topk(p)} w_e * expert_e(x),   p = softmax(router(x))
    w_e = p_e / sum_{topk} p   (k >= 2, Mixtral)        w_e = p_e   (k = 1, Switch Transformer)

- Routing: softmax over `n_experts` router logits (float32), the top `k` experts per token. At k >= 2 their
  probabilities are renormalized over the k (Mixtral); at k = 1 the chosen expert's output is scaled by its
  probability itself (Switch Transformer, Fedus et al. 2021): renormalizing one weight makes it exactly 1,
  and the router would get no gradient from the language-model loss. Routing is a deterministic function of
  the weights and the input (`torch.topk` breaks exact ties the same way every call), so the same seed
  routes the same way.
- Each expert runs on exactly the tokens routed to it (gather, expert, scaled scatter-add), so the work per
  token is k experts, which is what the FLOP count charges (model/counting.py).
- Load balance (Switch Transformer, Fedus et al. 2021, eq. 4, with top-k dispatch):
      aux = coef * E * sum_e f_e * P_e,   P_e = mean_tokens p_e,  f_e per `aux_load` (`model.moe_aux_load`):
        "slots"  (default)  f_e = (tokens dispatched to e) / (tokens * k): the share of the N*k dispatched
                            slots, summing to 1 (Megatron-core's switch loss divides by k too); aux = coef
                            at perfect balance, whatever k.
        "tokens"            f_e = (tokens dispatched to e) / tokens: the share of tokens that chose e, summing
                            to k (Hugging Face's Mixtral/Qwen-MoE load_balancing_loss_func); k times the
                            "slots" value, so the same coef pushes k times as hard (aux = coef * k balanced).
  At k = 1 the two are the same. The block keeps its last `aux_loss` (the model sums them,
  `Llama.aux_losses`) and its last per-expert load (share of dispatched slots, detached, for diagnostics).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .config import MOE_AUX_LOADS as AUX_LOADS
from .mlp import SwiGLU


class MoE(nn.Module):
    def __init__(self, d_model: int, d_ff: int, n_experts: int, top_k: int, shared_expert: bool = False,
                 aux_coef: float = 0.01, aux_load: str = "slots") -> None:
        super().__init__()
        self.n_experts, self.top_k, self.aux_coef, self.aux_load = n_experts, top_k, aux_coef, aux_load
        self.router = nn.Linear(d_model, n_experts, bias=False)
        self.experts = nn.ModuleList(SwiGLU(d_model, d_ff) for _ in range(n_experts))
        self.shared = SwiGLU(d_model, d_ff) if shared_expert else None
        self.aux_loss: torch.Tensor | None = None
        self.load: torch.Tensor | None = None  # [n_experts] share of dispatched slots, last forward

    def route(self, flat: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(router probabilities [N, E] float32, chosen experts [N, k], their weights [N, k]: renormalized
        over the k at k >= 2, the probability itself at k = 1)."""
        probs = F.softmax(self.router(flat).float(), dim=-1)
        weights, chosen = probs.topk(self.top_k, dim=-1)
        if self.top_k == 1:  # Switch: a weight renormalized over one expert is 1, with no gradient to the router
            return probs, chosen, weights
        return probs, chosen, weights / weights.sum(dim=-1, keepdim=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        flat = x.reshape(-1, shape[-1])
        probs, chosen, weights = self.route(flat)
        out = torch.zeros_like(flat)
        for e, expert in enumerate(self.experts):
            # An expert no token chose still runs (on zero rows): its weights get a zero gradient, not None,
            # so every rank's DDP reduction sees every parameter and the optimizer steps them alike.
            token, slot = (chosen == e).nonzero(as_tuple=True)
            contribution = expert(flat[token]) * weights[token, slot, None].to(flat.dtype)
            out = out.index_add(0, token, contribution)
        if self.shared is not None:
            out = out + self.shared(flat)
        self.load = torch.bincount(chosen.reshape(-1), minlength=self.n_experts).float().div(chosen.numel()).detach()
        self.aux_loss = load_balancing_loss(probs, chosen, self.n_experts, self.aux_load) * self.aux_coef
        return out.view(shape)


def load_balancing_loss(probs: torch.Tensor, chosen: torch.Tensor, n_experts: int, aux_load: str = "slots"
                        ) -> torch.Tensor:
    """E * sum_e f_e * P_e. With "slots": 1 at perfect balance, E when every token goes to one expert with
    probability 1; with "tokens" k times that."""
    if aux_load not in AUX_LOADS:
        raise ValueError(f"aux_load must be one of {AUX_LOADS}, not {aux_load!r}.")
    slots = chosen.numel() if aux_load == "slots" else chosen.shape[0]
    dispatched = F.one_hot(chosen, n_experts).float().sum(dim=(0, 1)) / slots  # f_e, no gradient
    return n_experts * (dispatched * probs.mean(dim=0)).sum()
