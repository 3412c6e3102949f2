"""WISCA on LoRA adapters: balance the L1 norms of the factors of Delta W = scaling * B @ A.

B @ A is a multiplicative pair like (W_q, W_k): for any positive s, (s B)(A / s) = B A, and for a positive
per-rank vector s_j, B diag(s) diag(1/s) A = B A. So (papers.md, WISCA "LoRA variant", candidate (i)):

    tensor level:   s   = sqrt(||A||_1 / ||B||_1);            B <- s B,            A <- A / s
    channel level:  s_j = sqrt(||A[j, :]||_1 / ||B[:, j]||_1); B[:, j] <- s_j B[:, j], A[j, :] <- A[j, :] / s_j

afterwards ||B||_1 == ||A||_1 (per rank channel j at channel level) and the adapted weight is unchanged up
to float32 rounding. A side whose norm is zero (B = 0 at a LoRA start) keeps scale 1: nothing to balance.
The transition is a list of `Rescale`s, so it shares the attention pairs' schedule and optimizer-state
policies (`opt_state.py`: m / s, v / s^2 for `rescale`). Candidate (ii) of papers.md (QK/VO balancing of the
merged W + B A) is not implemented: with the base frozen it cannot be carried by the trained tensors alone.
"""

from __future__ import annotations

from torch import nn

from lit_modules.techniques.lora.adapter import adapters
from lit_modules.techniques.wisca.rescales import Rescale, balancing_scale, l1


def plan_lora(adapter: nn.Module, granularity: str) -> tuple[list[Rescale], dict[str, float]]:
    """Rescales for (B, A) of one adapter and their stats: the L1 ratio ||B||_1 / ||A||_1 before, and the
    scale(s) applied to B."""
    a, b = adapter.lora_A, adapter.lora_B
    a_l1, b_l1 = l1(a), l1(b)
    stats = {"lora_l1_ratio": (b_l1 / a_l1).item() if a_l1 > 0 else float("nan")}
    if granularity == "tensor":
        s = balancing_scale(a_l1, b_l1)
        stats["lora_scale"] = s.item()
        return [Rescale("lora_B", b, s), Rescale("lora_A", a, 1.0 / s)], stats
    s = balancing_scale(a.detach().float().abs().sum(dim=1), b.detach().float().abs().sum(dim=0))  # [r]
    stats.update(lora_scale_min=s.min().item(), lora_scale_max=s.max().item())
    return [Rescale("lora_B", b, s.reshape(1, -1)), Rescale("lora_A", a, (1.0 / s).reshape(-1, 1))], stats


def plan_lora_model(model: nn.Module, granularity: str) -> tuple[list[Rescale], dict[str, float]]:
    """Rescales of every adapter of `model`, with per-adapter metrics keyed by the adapted module's path."""
    rescales: list[Rescale] = []
    metrics: dict[str, float] = {}
    for path, adapter in adapters(model):
        r, stats = plan_lora(adapter, granularity)
        rescales += [Rescale(f"{path}.{x.name}", x.param, x.factor) for x in r]
        metrics.update({f"wisca/{path}/{k}": v for k, v in stats.items()})
    return rescales, metrics


def has_adapters(model: nn.Module) -> bool:
    return bool(adapters(model))



